/*
 * frame_memo.h — the frames the process has classified (site_rules.c), by what they say.
 *
 * A report reads the ranks' files on several threads, and the ranks of one job name the same
 * frames: PyTorch's C++ and Python frames, the model's lines. Classifying a frame (demangling
 * it, matching it against every list of patterns) took 0.25–0.31 ms for the 515 frames of a
 * PyTorch snapshot; a frame met on an earlier file — of any thread: the thread that finishes
 * its first file last finds what the other classified meanwhile — is looked up by its function,
 * file and module instead. One table behind one lock; it grows to at most RS_FRAME_MEMO_MAX
 * frames and then only serves what it holds, is emptied when the rules change
 * (rs_site_rules_set), and lives as long as the process.
 */
#ifndef RANKSNAP_FRAME_MEMO_H
#define RANKSNAP_FRAME_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "site_rules.h"

#define RS_FRAME_MEMO_MAX 65536

/* What classifying a frame reads of it (rs_frame_memo_key_init): module is "" for a frame
 * without one (no_module 1) or whose module index is out of range (no_module 0); line_known is
 * line > 0. The rest is the key's hash and lengths, made once for a lookup and an insertion,
 * from names_hash, the frame's rs_snap_frame_text_hash of function and file. */
typedef struct rs_frame_memo_key {
    const char *s[3]; /* function, file, module */
    size_t len[3];
    uint8_t no_module, line_known;
    uint64_t hash;
} rs_frame_memo_key;

void rs_frame_memo_key_init(rs_frame_memo_key *k, const char *function, const char *file,
                            const char *module, int no_module, int line_known, uint64_t names_hash);

/* 1 with *out filled (its name and label the caller's to free, as classify's are) when a thread
 * classified the same frame under rules generation `gen`; 0 otherwise. */
int rs_frame_memo_get(unsigned gen, const rs_frame_memo_key *k, rs_site_rules_frame *out);

/* Remembers `info` for `k` under generation `gen` (copied; nothing is remembered when memory
 * for it cannot be had, or the table is full). */
void rs_frame_memo_put(unsigned gen, const rs_frame_memo_key *k, const rs_site_rules_frame *info);

/* The frames remembered (for the tests). */
size_t rs_frame_memo_count(void);

#endif
