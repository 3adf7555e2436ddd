/*
 * pickle_frames.h — frames lists read from their memo GETs, and the memo keys of an entry read
 * from its bytes (pickle_frames.c).
 */
#ifndef RANKSNAP_PICKLE_FRAMES_H
#define RANKSNAP_PICKLE_FRAMES_H

#include <stddef.h>

#include "pickle_dec.h"

/* The list made by the EMPTY_LIST at `list_at` whose items follow from buf[p] as memo GETs of
 * values (MARK GET... APPENDS, one GET and APPEND, or none: an empty list), NULL when they are
 * laid out otherwise or there is no memory; *end is then after them. The list outlives the
 * batch (a reader keeps an entry's frames, and the memo holds it): made in the document's
 * memory, it needs no copy when the batch ends; frame dicts the open batch made are copied out
 * to go in it (the first entries'). Bytes met before give the list they gave (struct span_memo). */
rs_pickle_value *rs_pk_gets_list(dec *d, size_t list_at, size_t p, size_t *end);

/* MEMOIZE's next n keys, from memo.count on, free in the memo's array (it goes that far): they
 * are unless a PUT stored a key there (PyTorch's pickles have none). */
int rs_pk_memo_next_free(const dec *d, size_t n);

/* The n keys from memo.count on were just given the values of an item handed over (or read)
 * as it came, all of which outlive the batch. When nothing of the batch waits in the memo
 * before them (handed over by the flush, or by the item before), the batch's end need not look
 * at them (38,850 keys a 2.5 MB pickle, 3% of its decode). */
void rs_pk_memo_direct(dec *d, size_t n);

#endif
