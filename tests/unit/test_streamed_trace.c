/*
 * test_streamed_trace.c — PyTorch-shaped traces written here opcode by opcode (protocol 4, with
 * MEMOIZE), decoded as the pickle streams them: frames lists met again by their bytes
 * (pickle_frames.c, struct span_memo), layouts the streamed decode refuses, the trace read
 * without segments, and entries that change size past the decoder's guess.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "crafted_inputs.h"
#include "snap_same.h"
#include "torch_decode.h"

/* ---- frames lists met again by their bytes (pickle.c, struct span_memo) -------------------- */

/* A protocol 4 pickle being written with MEMOIZE, its next memo key counted. */
typedef struct pk4 {
    crafted b;
    unsigned next;
} pk4;

static unsigned pk4_memo(pk4 *p)
{
    cr_byte(&p->b, 0x94); /* MEMOIZE */
    return p->next++;
}

static unsigned pk4_str(pk4 *p, const char *s)
{
    pk_str(&p->b, s);
    return pk4_memo(p);
}

static void pk4_get(pk4 *p, unsigned key)
{
    if (key < 256) {
        cr_byte(&p->b, 'h'); /* BINGET */
        cr_byte(&p->b, key);
        return;
    }
    cr_byte(&p->b, 'j'); /* LONG_BINGET */
    for (int i = 0; i < 4; i++) cr_byte(&p->b, (key >> (8 * i)) & 255);
}

/* The string w: written and memoized the first time (its key kept in *key), fetched after. */
static void pk4_word(pk4 *p, unsigned *key, const char *w)
{
    if (*key) pk4_get(p, *key);
    else *key = pk4_str(p, w);
}

/* PROTO 4 and the snapshot's dict, its MARK open for the keys. */
static void pk4_begin(pk4 *p)
{
    cr_byte(&p->b, 0x80);
    cr_byte(&p->b, 4);
    cr_byte(&p->b, '}');
    (void)pk4_memo(p);
    cr_byte(&p->b, '(');
}

/* A memoized list, its MARK open for the items. */
static void pk4_list(pk4 *p)
{
    cr_byte(&p->b, ']');
    (void)pk4_memo(p);
    cr_byte(&p->b, '(');
}

/* SETITEMS of the snapshot's dict and STOP: the pickle's bytes (NULL without memory). */
static unsigned char *pk4_end(pk4 *p, size_t *len)
{
    cr_byte(&p->b, 'u');
    cr_byte(&p->b, '.');
    return cr_done(&p->b, len);
}

/* pk4_begin, then "segments": an empty list (a snapshot taken with nothing reserved). */
static void pk4_begin_no_segments(pk4 *p)
{
    pk4_begin(p);
    pk4_str(p, "segments");
    cr_byte(&p->b, ']');
    (void)pk4_memo(p);
}

/* pk4_begin_no_segments, then "device_traces": its list and the first device's list, open for
 * entries. */
static void pk4_begin_trace(pk4 *p)
{
    pk4_begin_no_segments(p);
    pk4_str(p, "device_traces");
    pk4_list(p);
    pk4_list(p);
}

/* {"name": "forward", "filename": "model.py", "line": line}; words[0..5) the keys of those
 * strings, 0 before they are written. */
static unsigned pk4_frame(pk4 *p, unsigned *words, unsigned line)
{
    static const char *const w[] = {"name", "forward", "filename", "model.py", "line"};
    cr_byte(&p->b, '}');
    unsigned key = pk4_memo(p);
    cr_byte(&p->b, '(');
    for (int i = 0; i < 5; i++) pk4_word(p, &words[i], w[i]);
    pk_uint(&p->b, line);
    cr_byte(&p->b, 'u');
    return key;
}

/* An alloc entry whose frames are the memo GETs of frames[0..n) (or, when n is 0, new frame
 * dicts of lines 1, 2, 3, their keys put in frames[0..3)); words[5..12) its strings' keys.
 * Returns its frames list's memo key. */
static unsigned pk4_entry(pk4 *p, unsigned *words, uint64_t addr, unsigned *frames, size_t n)
{
    cr_byte(&p->b, '}');
    (void)pk4_memo(p);
    cr_byte(&p->b, '(');
    pk4_word(p, &words[5], "action");
    pk4_word(p, &words[6], "alloc");
    pk4_word(p, &words[7], "addr");
    pk_uint(&p->b, addr);
    pk4_word(p, &words[8], "size");
    pk_uint(&p->b, 512);
    pk4_word(p, &words[9], "stream");
    pk_uint(&p->b, 0);
    pk4_word(p, &words[10], "time_us");
    pk_uint(&p->b, addr >> 8);
    pk4_word(p, &words[11], "frames");
    cr_byte(&p->b, ']');
    unsigned list = pk4_memo(p);
    cr_byte(&p->b, '(');
    if (n == 0)
        for (unsigned line = 1; line <= 3; line++) frames[line - 1] = pk4_frame(p, words, line);
    for (size_t i = 0; i < n; i++) pk4_get(p, frames[i]);
    cr_byte(&p->b, 'e');
    cr_byte(&p->b, 'u');
    return list;
}

/* A snapshot whose second batch of trace entries writes the same frames-list bytes (GETs of the
 * three frames of lines 1, 2, 3 the first batch made) three times, and between the second and
 * the third gives the first frame's memo key the second frame (BINPUT). `pad` memoized strings
 * come first; *third is the memo key the third frame got. With `grow`, the second entry's
 * frames list gets one more frame (GET, MARK, GET, APPENDS) after it is made. */
static unsigned char *pk4_rebound(unsigned pad, int grow, unsigned *third, size_t *len)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, frames[3];
    pk4_begin_no_segments(&p);
    pk4_str(&p, "pad");
    pk4_list(&p);
    for (unsigned i = 0; i < pad; i++) {
        char t[16];
        snprintf(t, sizeof t, "p%u", i);
        pk4_str(&p, t);
    }
    cr_byte(&p.b, 'e');
    pk4_str(&p, "device_traces");
    pk4_list(&p);
    cr_byte(&p.b, ']');
    (void)pk4_memo(&p);
    cr_byte(&p.b, '('); /* the first batch makes the frames */
    pk4_entry(&p, words, 0x10000, frames, 0);
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, '('); /* the second fetches them */
    pk4_entry(&p, words, 0x20000, frames, 3);
    unsigned second = pk4_entry(&p, words, 0x30000, frames, 3);
    if (grow) {
        pk4_get(&p, second);
        cr_byte(&p.b, '(');
        pk4_get(&p, frames[0]);
        cr_byte(&p.b, 'e');
        cr_byte(&p.b, '0'); /* POP */
    }
    pk4_get(&p, frames[1]); /* memo[frames[0]] = the frame of line 2 */
    cr_byte(&p.b, 'q');
    cr_byte(&p.b, frames[0]);
    cr_byte(&p.b, '0'); /* POP */
    pk4_entry(&p, words, 0x40000, frames, 3);
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, 'u');
    cr_byte(&p.b, '.');
    *third = frames[2];
    return cr_done(&p.b, len);
}

static unsigned first_line_of_stack(const rs_snap *s, uint64_t k)
{
    const rs_snap_stack *st = &s->stacks[s->history.stack[k] - 1];
    return st->n_frames ? (unsigned)s->frames[st->frames[0]].line : 0;
}

TEST(a_frames_list_met_again_is_read_again_after_its_memo_keys_change)
{
    /* the third frame's memo key is 101, the APPENDS byte: its BINGET's argument is a false end
     * of the list's bytes, before the real one */
    size_t len = 0;
    unsigned third = 0, pad = 0;
    unsigned char *buf = pk4_rebound(pad, 0, &third, &len);
    CHECK(buf && third < 101);
    free(buf);
    pad = 101 - third;
    buf = pk4_rebound(pad, 0, &third, &len);
    CHECK(buf && third == 101);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    rs_snap *streamed = NULL, *tree = NULL;
    CHECK(rs_torch_decode(buf, len, "rebound.pickle", &o, &streamed) == RANKSNAP_OK);
    o.stream = 0;
    CHECK(rs_torch_decode(buf, len, "rebound.pickle", &o, &tree) == RANKSNAP_OK);
    const char *differs = snap_same(streamed, tree);
    if (differs) fprintf(stderr, "     %s differs\n", differs);
    CHECK(differs == NULL);
    const rs_snap_history *h = &streamed->history;
    CHECK(h->count == 4);
    /* entries 1 and 2: lines 1, 2, 3; entry 3, after the BINPUT: lines 2, 2, 3 */
    CHECK(h->stack[1] == h->stack[0] && h->stack[2] == h->stack[0]);
    CHECK(h->stack[3] != h->stack[0]);
    CHECK(first_line_of_stack(streamed, 0) == 1 && first_line_of_stack(streamed, 2) == 1);
    CHECK(first_line_of_stack(streamed, 3) == 2);
    CHECK(streamed->stacks[h->stack[3] - 1].n_frames == 3);
    rs_snap_free(streamed);
    rs_snap_free(tree);
    free(buf);
}

/* buf decoded streamed and as the value tree, steps not inferred: 1 when both decodes succeed. */
static int decode_both(const unsigned char *buf, size_t len, const char *name, rs_snap **streamed,
                       rs_snap **tree)
{
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    int ok = rs_torch_decode(buf, len, name, &o, streamed) == RANKSNAP_OK;
    o.stream = 0;
    return (rs_torch_decode(buf, len, name, &o, tree) == RANKSNAP_OK) & ok;
}

/* Lists of the same bytes are one value in a streamed decode (pickle.c, struct span_memo). An
 * entry followed by something that may change it (here its frames list fetched and grown) is not
 * taken by the trace reader but read by the machine, so the grown list is the second entry's
 * alone: the streamed decode gives the value tree's snapshot, lists of 3 and 4 frames. */
TEST(a_frames_list_grown_after_its_entry_is_read_as_the_value_tree_reads_it)
{
    size_t len = 0;
    unsigned third = 0;
    unsigned char *buf = pk4_rebound(0, 1, &third, &len);
    CHECK(buf != NULL);
    rs_snap *streamed = NULL, *tree = NULL;
    CHECK(decode_both(buf, len, "grown.pickle", &streamed, &tree));
    const char *differs = streamed && tree ? snap_same(streamed, tree) : "a decode failed";
    if (differs) fprintf(stderr, "     %s differs\n", differs);
    CHECK(differs == NULL);
    /* the first two entries' lists: lines 1, 2, 3 and 1, 2, 3, 1 */
    CHECK(streamed && streamed->history.count == 4 &&
          streamed->stacks[streamed->history.stack[1] - 1].n_frames == 3 &&
          streamed->stacks[streamed->history.stack[2] - 1].n_frames == 4);
    rs_snap_free(streamed);
    rs_snap_free(tree);
    free(buf);
}

/* Entries are handed to the reader as they are read; a pickle whose batch of entries then ends
 * otherwise than by its APPENDS (here a TUPLE takes them) would leave the reader with entries
 * the value tree does not have: refused when streamed, naming the opcode and the list. */
TEST(a_batch_of_entries_closed_by_another_opcode_is_refused_when_streamed)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, frames[3];
    pk4_begin_trace(&p);
    pk4_entry(&p, words, 0x10000, frames, 0);
    pk4_entry(&p, words, 0x20000, frames, 3);
    cr_byte(&p.b, 't'); /* TUPLE: the entries become a tuple, not the list's items */
    cr_byte(&p.b, 'e');
    size_t len = 0;
    unsigned char *buf = pk4_end(&p, &len);
    CHECK(buf != NULL);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    rs_snap *s = NULL;
    CHECK(rs_torch_decode(buf, len, "closed.pickle", &o, &s) == RANKSNAP_ERR_FORMAT && s == NULL);
    const char *e = ranksnap_last_error();
    CHECK(strstr(e, "closed.pickle: offset ") != NULL);
    CHECK(strstr(e, "TUPLE closes the MARK of items of device_traces[0] otherwise than by their "
                    "APPENDS") != NULL);
    if (!strstr(e, "TUPLE closes")) fprintf(stderr, "     %s\n", e);
    free(buf);
}

/* An entry whose dict gets a second MARK ... SETITEMS (its addr given again): valid pickle, which
 * the trace reader must leave to the machine, so that entries read from their bytes and made as
 * values agree (the fuzzer found the reader taking the entry at its first SETITEMS, after which
 * the second had no dict under its MARK). */
TEST(an_entry_filled_by_two_setitems_reads_as_the_machine_reads_it)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, frames[3];
    pk4_begin_trace(&p);
    for (int k = 0; k < 12; k++) pk4_entry(&p, words, 0x10000 + 0x1000 * (uint64_t)k, frames, k ? 3 : 0);
    cr_byte(&p.b, '('); /* MARK "addr" 0x99000 SETITEMS: the last entry's addr again */
    pk4_get(&p, words[7]);
    pk_uint(&p.b, 0x99000);
    cr_byte(&p.b, 'u');
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, 'e');
    size_t len = 0;
    unsigned char *buf = pk4_end(&p, &len);
    CHECK(buf != NULL);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.infer_steps = 0;
    rs_snap *bytes = NULL, *values = NULL;
    CHECK(rs_torch_decode(buf, len, "twice.pickle", &o, &bytes) == RANKSNAP_OK);
    o.read_entries = 0;
    CHECK(rs_torch_decode(buf, len, "twice.pickle", &o, &values) == RANKSNAP_OK);
    const char *diff = bytes && values ? snap_same(bytes, values) : "a decode failed";
    CHECK(diff == NULL);
    if (diff) fprintf(stderr, "     %s\n", diff);
    CHECK(bytes && bytes->history.count == 12 && bytes->history.addr[11] == 0x99000);
    rs_snap_free(bytes);
    rs_snap_free(values);
    free(buf);
}

/* No segments and two device traces, the second the busier: the trace read is the busier one,
 * counted in the entries the pickle streamed (which leave the lists themselves empty). */
TEST(without_segments_the_busiest_streamed_trace_is_the_one_read)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, frames[3];
    pk4_begin(&p);
    pk4_str(&p, "device_traces");
    pk4_list(&p);
    for (int device = 0; device < 2; device++) {
        pk4_list(&p);
        for (int i = 0; i <= 2 * device; i++)
            pk4_entry(&p, words, (uint64_t)(device + 1) << 20 | (uint64_t)(i + 1) << 12, frames, 0);
        cr_byte(&p.b, 'e');
    }
    cr_byte(&p.b, 'e');
    size_t len = 0;
    unsigned char *buf = pk4_end(&p, &len);
    CHECK(buf != NULL);
    rs_snap *streamed = NULL, *tree = NULL;
    CHECK(decode_both(buf, len, "two.pickle", &streamed, &tree));
    CHECK(streamed && streamed->history.count == 3 && streamed->device.index == 1);
    CHECK(tree && tree->history.count == 3 && snap_same(streamed, tree) == NULL);
    rs_snap_free(streamed);
    rs_snap_free(tree);
    free(buf);
}

/* One trace of `head` entries of `head_frames` frames, then `tail` of `tail_frames`: the decoder
 * guesses the trace's length from its first thousand entries (torch_decode.c, streamed_want). */
static unsigned char *trace_of_two_sizes(size_t head, size_t head_frames, size_t tail,
                                         size_t tail_frames, size_t *len)
{
    pk4 p = {{NULL, 0, 0, 0}, 0};
    unsigned words[12] = {0}, made[3], many[64];
    pk4_begin(&p);
    pk4_str(&p, "device_traces");
    pk4_list(&p);
    pk4_list(&p);
    pk4_entry(&p, words, 1 << 12, made, 0); /* makes the three frames */
    for (size_t i = 0; i < 64; i++) many[i] = made[i % 3];
    for (size_t i = 1; i < head + tail; i++)
        pk4_entry(&p, words, (uint64_t)(i + 1) << 12, many, i < head ? head_frames : tail_frames);
    cr_byte(&p.b, 'e');
    cr_byte(&p.b, 'e');
    return pk4_end(&p, len);
}

/* Entries that grow smaller after the first thousand (more than guessed: the columns grow
 * again) or larger (fewer: room left over) are all read, as the tree reads them. */
TEST(a_trace_whose_entries_change_size_is_read_whole_past_the_decoders_guess)
{
    static const size_t cases[][4] = {{1100, 60, 20000, 1}, {1100, 1, 3000, 60}, {1024, 3, 1, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t len = 0;
        unsigned char *buf = trace_of_two_sizes(cases[c][0], cases[c][1], cases[c][2], cases[c][3], &len);
        CHECK(buf != NULL);
        rs_snap *streamed = NULL, *tree = NULL;
        CHECK(decode_both(buf, len, "sizes.pickle", &streamed, &tree));
        uint64_t n = cases[c][0] + cases[c][2];
        CHECK(streamed && streamed->history.count == n);
        CHECK(tree && tree->history.count == n);
        const char *differs = streamed && tree ? snap_same(streamed, tree) : "a decode";
        if (differs) fprintf(stderr, "case %zu: %s differs\n", c, differs);
        CHECK(differs == NULL);
        for (uint64_t i = 0; streamed && i < streamed->history.count && i < n; i++)
            if (streamed->history.addr[i] != (i + 1) << 12) {
                fprintf(stderr, "case %zu: entry %llu out of place\n", c, (unsigned long long)i);
                CHECK(0);
                break;
            }
        rs_snap_free(streamed);
        rs_snap_free(tree);
        free(buf);
    }
}

int main(void)
{
    RUN(a_frames_list_met_again_is_read_again_after_its_memo_keys_change);
    RUN(a_frames_list_grown_after_its_entry_is_read_as_the_value_tree_reads_it);
    RUN(a_batch_of_entries_closed_by_another_opcode_is_refused_when_streamed);
    RUN(an_entry_filled_by_two_setitems_reads_as_the_machine_reads_it);
    RUN(without_segments_the_busiest_streamed_trace_is_the_one_read);
    RUN(a_trace_whose_entries_change_size_is_read_whole_past_the_decoders_guess);
    return check_summary();
}
