/*
 * pickle_batch.h — streamed batches (pickle_batch.c): the items of a streamed list built in
 * scratch memory, copied out of it where they must outlive it, and handed to the reader.
 */
#ifndef RANKSNAP_PICKLE_BATCH_H
#define RANKSNAP_PICKLE_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "pickle_dec.h"

/* The batch's MARK went another way than its streamed APPENDS: what it made stays, in the
 * document's memory (its scratch chunks join the document's). Refused when entries of it were
 * handed over as they were read: the reader has them, the tree would not. */
ranksnap_status rs_pk_batch_seal(dec *d);

/* v and everything in it that the open batch made, copied out of its scratch memory (Cheney's
 * way: no recursion, and each value copied once, shared values staying shared). NULL when out
 * of memory. */
rs_pickle_value *rs_pk_evacuate(dec *d, rs_pickle_value *v);

/* Which list of root[stream key] the list at stack position `pos` is, when the stack is laid
 * out as pickle.dump leaves it while it writes that list: the root dict at the bottom, the MARK
 * of its batch of items, the key, then the list of lists and either the list itself (one list:
 * pickle.dump appends a single item without a MARK) or a MARK and the lists before it. -1
 * otherwise (nothing is streamed from a pickle laid out differently). */
int64_t rs_pk_stream_index_of(const dec *d, size_t pos);

/* MARK: when it starts the items of a streamed list, what follows is built in scratch memory. */
void rs_pk_batch_open(dec *d);

/* Hands items[0..n) appended to list `l` (root[key][index]) to the reader. */
ranksnap_status rs_pk_stream_take(dec *d, rs_pickle_value *l, int64_t index,
                                   rs_pickle_value *const *items, size_t n);

/* The streamed batch's APPENDS (its MARK popped: the items are stack[start..sp)): the memo's
 * values copied out, the items handed over, the scratch memory emptied for the next batch. */
ranksnap_status rs_pk_batch_end(dec *d, rs_pickle_value *l, int64_t index, size_t start);

/* The open batch's items so far (stack[mark..*sp), *sp the machine's) handed over as its APPENDS
 * would, and a new batch opened at the same MARK for the rest: what the machine does before the
 * stream's reader reads an entry, when entries the machine ran wait before it. 0, or -1 with
 * d->flush_err. */
int rs_pk_batch_flush(dec *d, size_t *sp);

#endif
