/*
 * test_pickle.c — the pickle decoder (collector/decode/pickle.c): every opcode it supports builds the
 * value Python would, shared references stay shared, every opcode that runs code is refused by
 * name, and damaged input (every truncation, every bit flip, lying lengths, broken stack
 * discipline) is a format error naming the offset, never a crash or a read past the buffer.
 * Pickles are built byte by byte here; pickles written by Python's own pickle module (protocols
 * 2 to 5) are decoded too when /usr/bin/python3 or python3 is there.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "find_python.h"
#include "pickle.h"

/* ---- a pickle, byte by byte ---------------------------------------------------------------- */

typedef struct pb {
    unsigned char b[4096];
    size_t n;
} pb;

static void put(pb *p, const void *src, size_t n)
{
    if (p->n + n > sizeof p->b) {
        fprintf(stderr, "test pickle too long\n");
        abort();
    }
    memcpy(p->b + p->n, src, n);
    p->n += n;
}

static void op(pb *p, unsigned char c)
{
    put(p, &c, 1);
}

static void le(pb *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) op(p, (unsigned char)(v >> (8 * i)));
}

static void short_str(pb *p, const char *s)
{
    op(p, 0x8c);
    op(p, (unsigned char)strlen(s));
    put(p, s, strlen(s));
}

static void binint1(pb *p, unsigned v)
{
    op(p, 0x4b);
    op(p, (unsigned char)v);
}

enum {
    MARK = 0x28, STOP = 0x2e, POP = 0x30, POP_MARK = 0x31, DUP = 0x32, BININT = 0x4a,
    BININT1 = 0x4b, BININT2 = 0x4d, NONE = 0x4e, BINUNICODE = 0x58, APPEND = 0x61, DICT = 0x64,
    EMPTY_DICT = 0x7d, APPENDS = 0x65, GET = 0x67, BINGET = 0x68, LONG_BINGET = 0x6a, LIST = 0x6c,
    EMPTY_LIST = 0x5d, PUT = 0x70, BINPUT = 0x71, LONG_BINPUT = 0x72, SETITEM = 0x73, TUPLE = 0x74,
    EMPTY_TUPLE = 0x29, SETITEMS = 0x75, BINFLOAT = 0x47, PROTO = 0x80, TUPLE1 = 0x85,
    TUPLE2 = 0x86, TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
    BINBYTES = 0x42, SHORT_BINBYTES = 0x43, SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d,
    BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90, FROZENSET = 0x91, MEMOIZE = 0x94,
    FRAME = 0x95, BYTEARRAY8 = 0x96
};

static void proto(pb *p, unsigned v)
{
    op(p, PROTO);
    op(p, (unsigned char)v);
}

/* Decodes and returns the root, or NULL (the doc in *doc either way, for rs_pickle_free). */
static const rs_pickle_value *decode(const pb *p, rs_pickle_doc **doc)
{
    *doc = NULL;
    ranksnap_status st = rs_pickle_decode(p->b, p->n, "t.pickle", doc);
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "decode failed: %s\n", ranksnap_last_error());
        return NULL;
    }
    return rs_pickle_root(*doc);
}

/* Expects a format error whose message holds `want`. */
static void expect_error(const pb *p, const char *want)
{
    rs_pickle_doc *doc = NULL;
    ranksnap_status st = rs_pickle_decode(p->b, p->n, "bad.pickle", &doc);
    CHECK(st == RANKSNAP_ERR_FORMAT);
    CHECK(doc == NULL);
    CHECK_STR_CONTAINS(ranksnap_last_error(), "bad.pickle: offset ");
    CHECK_STR_CONTAINS(ranksnap_last_error(), want);
    rs_pickle_free(doc);
}

static int is_int(const rs_pickle_value *v, int64_t want)
{
    int64_t x;
    return v && v->kind == RS_PICKLE_INT && rs_pickle_get_i64(v, &x) == 0 && x == want;
}

static int is_text(const rs_pickle_value *v, rs_pickle_kind kind, const char *s)
{
    return v && v->kind == kind && v->v.str.n == strlen(s) && memcmp(v->v.str.p, s, v->v.str.n) == 0;
}

/* ---- values -------------------------------------------------------------------------------- */

TEST(scalars_of_every_opcode_decode_to_their_values)
{
    pb p = {{0}, 0};
    proto(&p, 4);
    op(&p, FRAME);
    le(&p, 0, 8); /* a frame of 0 bytes: only a hint */
    op(&p, EMPTY_LIST);
    op(&p, MARK);
    op(&p, NONE);
    op(&p, NEWTRUE);
    op(&p, NEWFALSE);
    op(&p, BININT);
    le(&p, (uint32_t)-5, 4);
    binint1(&p, 200);
    op(&p, BININT2);
    le(&p, 60000, 2);
    op(&p, BINFLOAT); /* 1.5 big-endian */
    put(&p, "\x3f\xf8\x00\x00\x00\x00\x00\x00", 8);
    short_str(&p, "h\xc3\xa9");
    op(&p, BINUNICODE);
    le(&p, 3, 4);
    put(&p, "abc", 3);
    op(&p, BINUNICODE8);
    le(&p, 2, 8);
    put(&p, "xy", 2);
    op(&p, SHORT_BINBYTES);
    op(&p, 2);
    put(&p, "\x00\x01", 2);
    op(&p, BINBYTES);
    le(&p, 1, 4);
    put(&p, "b", 1);
    op(&p, BINBYTES8);
    le(&p, 1, 8);
    put(&p, "8", 1);
    op(&p, BYTEARRAY8);
    le(&p, 1, 8);
    put(&p, "a", 1);
    op(&p, APPENDS);
    op(&p, STOP);

    rs_pickle_doc *doc;
    const rs_pickle_value *r = decode(&p, &doc);
    CHECK(r && r->kind == RS_PICKLE_LIST && rs_pickle_len(r) == 14);
    CHECK(rs_pickle_protocol(doc) == 4);
    if (r && rs_pickle_len(r) == 14) {
        CHECK(rs_pickle_item(r, 0)->kind == RS_PICKLE_NONE);
        CHECK(rs_pickle_item(r, 1)->kind == RS_PICKLE_BOOL && rs_pickle_item(r, 1)->v.b == 1);
        CHECK(rs_pickle_item(r, 2)->kind == RS_PICKLE_BOOL && rs_pickle_item(r, 2)->v.b == 0);
        CHECK(is_int(rs_pickle_item(r, 3), -5));
        CHECK(is_int(rs_pickle_item(r, 4), 200));
        CHECK(is_int(rs_pickle_item(r, 5), 60000));
        CHECK(rs_pickle_item(r, 6)->kind == RS_PICKLE_FLOAT && rs_pickle_item(r, 6)->v.f == 1.5);
        CHECK(is_text(rs_pickle_item(r, 7), RS_PICKLE_STR, "h\xc3\xa9"));
        CHECK(is_text(rs_pickle_item(r, 8), RS_PICKLE_STR, "abc"));
        CHECK(is_text(rs_pickle_item(r, 9), RS_PICKLE_STR, "xy"));
        CHECK(rs_pickle_item(r, 10)->kind == RS_PICKLE_BYTES && rs_pickle_item(r, 10)->v.str.n == 2);
        CHECK(is_text(rs_pickle_item(r, 11), RS_PICKLE_BYTES, "b"));
        CHECK(is_text(rs_pickle_item(r, 12), RS_PICKLE_BYTES, "8"));
        CHECK(is_text(rs_pickle_item(r, 13), RS_PICKLE_BYTES, "a"));
        CHECK(rs_pickle_str_is(rs_pickle_item(r, 8), "abc") && !rs_pickle_str_is(rs_pickle_item(r, 8), "ab"));
    }
    rs_pickle_free(doc);
}

TEST(ints_of_every_width_keep_64_bit_values_and_flag_wider_ones)
{
    static const struct {
        const char *bytes;
        unsigned n;
        int kind;      /* RS_PICKLE_INT or RS_PICKLE_BIGINT */
        int is_u64;
        int64_t i;
        uint64_t u;
    } cases[] = {
        {"", 0, RS_PICKLE_INT, 0, 0, 0},
        {"\xff", 1, RS_PICKLE_INT, 0, -1, 0},
        {"\x7f\xff", 2, RS_PICKLE_INT, 0, -129, 0},
        {"\xff\x00", 2, RS_PICKLE_INT, 0, 255, 0},
        {"\x00\x00\x00\x00\x00\x00\x00\x80", 8, RS_PICKLE_INT, 0, INT64_MIN, 0},
        {"\xff\xff\xff\xff\xff\xff\xff\x7f", 8, RS_PICKLE_INT, 0, INT64_MAX, 0},
        {"\xff\xff\xff\xff\xff\xff\xff\xff\x00", 9, RS_PICKLE_INT, 1, 0, UINT64_MAX},
        {"\x00\x00\x00\x00\x00\x00\x00\x80\x00", 9, RS_PICKLE_INT, 1, 0, (uint64_t)1 << 63},
        {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 10, RS_PICKLE_INT, 0, -1, 0}, /* redundant sign bytes */
        {"\xff\xff\xff\xff\xff\xff\xff\x7f\xff", 9, RS_PICKLE_BIGINT, 0, 0, 0},   /* below INT64_MIN */
        {"\x00\x00\x00\x00\x00\x00\x00\x00\x01", 9, RS_PICKLE_BIGINT, 0, 0, 0},   /* 2^64 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int long4 = 0; long4 < 2; long4++) {
            pb p = {{0}, 0};
            proto(&p, 2);
            op(&p, long4 ? LONG4 : LONG1);
            le(&p, cases[c].n, long4 ? 4 : 1);
            put(&p, cases[c].bytes, cases[c].n);
            op(&p, STOP);
            rs_pickle_doc *doc;
            const rs_pickle_value *v = decode(&p, &doc);
            CHECK(v && v->kind == cases[c].kind);
            if (v && v->kind == RS_PICKLE_INT && !cases[c].is_u64) {
                int64_t x = 0;
                CHECK(v->is_u64 == 0 && rs_pickle_get_i64(v, &x) == 0 && x == cases[c].i);
                uint64_t u;
                CHECK((rs_pickle_get_u64(v, &u) == 0) == (cases[c].i >= 0));
            }
            if (v && cases[c].is_u64) {
                uint64_t u = 0;
                int64_t x;
                CHECK(v->is_u64 && rs_pickle_get_u64(v, &u) == 0 && u == cases[c].u);
                CHECK(rs_pickle_get_i64(v, &x) != 0);
            }
            if (v && v->kind == RS_PICKLE_BIGINT) {
                uint64_t u;
                CHECK(rs_pickle_get_u64(v, &u) != 0);
            }
            rs_pickle_free(doc);
        }
    }
}

TEST(dicts_lists_tuples_and_sets_nest_as_python_builds_them)
{
    pb p = {{0}, 0};
    proto(&p, 4);
    op(&p, EMPTY_DICT);
    short_str(&p, "one"); /* SETITEM */
    binint1(&p, 1);
    op(&p, SETITEM);
    op(&p, MARK); /* SETITEMS */
    short_str(&p, "list");
    op(&p, MARK);
    binint1(&p, 1);
    binint1(&p, 2);
    op(&p, LIST);
    binint1(&p, 3);
    op(&p, APPEND);
    short_str(&p, "tuples");
    op(&p, MARK);
    op(&p, EMPTY_TUPLE);
    binint1(&p, 1);
    op(&p, TUPLE1);
    binint1(&p, 1);
    binint1(&p, 2);
    op(&p, TUPLE2);
    binint1(&p, 1);
    binint1(&p, 2);
    binint1(&p, 3);
    op(&p, TUPLE3);
    op(&p, MARK);
    binint1(&p, 1);
    binint1(&p, 2);
    binint1(&p, 3);
    binint1(&p, 4);
    op(&p, TUPLE);
    op(&p, TUPLE);
    short_str(&p, "sets");
    op(&p, EMPTY_SET);
    op(&p, MARK);
    binint1(&p, 7);
    binint1(&p, 8);
    op(&p, ADDITEMS);
    op(&p, MARK);
    short_str(&p, "f");
    op(&p, FROZENSET);
    op(&p, TUPLE2);
    short_str(&p, "dict");
    op(&p, MARK);
    short_str(&p, "k");
    op(&p, NONE);
    op(&p, DICT);
    op(&p, SETITEMS);
    short_str(&p, "one"); /* set again: the last value wins, as in Python */
    binint1(&p, 11);
    op(&p, SETITEM);
    op(&p, STOP);

    rs_pickle_doc *doc;
    const rs_pickle_value *r = decode(&p, &doc);
    CHECK(r && r->kind == RS_PICKLE_DICT);
    CHECK(is_int(rs_pickle_dict_get(r, "one"), 11));
    CHECK(rs_pickle_dict_get(r, "missing") == NULL);
    const rs_pickle_value *l = rs_pickle_dict_get(r, "list");
    CHECK(l && l->kind == RS_PICKLE_LIST && rs_pickle_len(l) == 3 && is_int(rs_pickle_item(l, 2), 3));
    const rs_pickle_value *t = rs_pickle_dict_get(r, "tuples");
    CHECK(t && t->kind == RS_PICKLE_TUPLE && rs_pickle_len(t) == 5);
    for (size_t i = 0; t && i < 5; i++) {
        const rs_pickle_value *ti = rs_pickle_item(t, i);
        CHECK(ti && ti->kind == RS_PICKLE_TUPLE && rs_pickle_len(ti) == i);
        if (ti && i > 0) CHECK(is_int(rs_pickle_item(ti, i - 1), (int64_t)i));
    }
    const rs_pickle_value *s = rs_pickle_dict_get(r, "sets");
    CHECK(s && rs_pickle_len(s) == 2);
    CHECK(s && rs_pickle_item(s, 0)->kind == RS_PICKLE_SET && rs_pickle_len(rs_pickle_item(s, 0)) == 2);
    CHECK(s && rs_pickle_item(s, 1)->kind == RS_PICKLE_FROZENSET && rs_pickle_str_is(rs_pickle_item(rs_pickle_item(s, 1), 0), "f"));
    CHECK(s && rs_pickle_is_sequence(rs_pickle_item(s, 0)) && is_int(rs_pickle_item(rs_pickle_item(s, 0), 1), 8));
    const rs_pickle_value *d = rs_pickle_dict_get(r, "dict");
    CHECK(d && d->kind == RS_PICKLE_DICT && rs_pickle_len(d) == 1 && rs_pickle_dict_get(d, "k")->kind == RS_PICKLE_NONE);
    rs_pickle_free(doc);
}

TEST(memo_get_shares_a_list_that_is_mutated_later)
{
    /* outer = []; a = []; outer.append(a); outer.append(a); a.append(7) — through the memo, with
     * every PUT and GET form. */
    pb p = {{0}, 0};
    proto(&p, 4);
    op(&p, EMPTY_LIST);
    op(&p, MEMOIZE);     /* key 0: outer */
    op(&p, EMPTY_LIST);
    op(&p, BINPUT);      /* key 1: a */
    op(&p, 1);
    op(&p, LONG_BINPUT); /* key 70000: a again */
    le(&p, 70000, 4);
    op(&p, PUT);         /* key 12: a again */
    put(&p, "12\n", 3);
    op(&p, APPEND);
    op(&p, BINGET);
    op(&p, 1);
    op(&p, APPEND);
    op(&p, LONG_BINGET);
    le(&p, 70000, 4);
    binint1(&p, 7);
    op(&p, APPEND);
    op(&p, POP);
    op(&p, GET);
    put(&p, "12\n", 3);
    op(&p, DUP);
    op(&p, POP);
    op(&p, APPEND);
    op(&p, STOP);

    rs_pickle_doc *doc;
    const rs_pickle_value *r = decode(&p, &doc);
    CHECK(r && r->kind == RS_PICKLE_LIST && rs_pickle_len(r) == 3);
    if (r && rs_pickle_len(r) == 3) {
        CHECK(rs_pickle_item(r, 0) == rs_pickle_item(r, 1) && rs_pickle_item(r, 1) == rs_pickle_item(r, 2));
        CHECK(rs_pickle_len(rs_pickle_item(r, 0)) == 1 && is_int(rs_pickle_item(rs_pickle_item(r, 0), 0), 7));
    }
    rs_pickle_free(doc);
}

TEST(memoized_strings_and_self_references_are_one_value)
{
    pb p = {{0}, 0};
    proto(&p, 4);
    op(&p, EMPTY_LIST);
    op(&p, MEMOIZE);        /* 0: the list */
    short_str(&p, "frame");
    op(&p, MEMOIZE);        /* 1: the string */
    op(&p, APPEND);
    op(&p, BINGET);
    op(&p, 1);
    op(&p, APPEND);
    op(&p, BINGET);         /* the list into itself */
    op(&p, 0);
    op(&p, APPEND);
    op(&p, STOP);
    rs_pickle_doc *doc;
    const rs_pickle_value *r = decode(&p, &doc);
    CHECK(r && rs_pickle_len(r) == 3 && rs_pickle_item(r, 0) == rs_pickle_item(r, 1) && rs_pickle_item(r, 2) == r);
    rs_pickle_free(doc);
}

TEST(deep_nesting_costs_no_c_stack)
{
    /* 1,000 lists nested by APPEND after 1,000 EMPTY_LISTs: the decoder does not recurse. */
    pb p = {{0}, 0};
    proto(&p, 4);
    for (int i = 0; i < 1000; i++) op(&p, EMPTY_LIST);
    for (int i = 0; i < 999; i++) op(&p, APPEND);
    op(&p, STOP);
    rs_pickle_doc *doc;
    const rs_pickle_value *r = decode(&p, &doc);
    int depth = 0;
    for (const rs_pickle_value *v = r; v && v->kind == RS_PICKLE_LIST; v = rs_pickle_item(v, 0)) depth++;
    CHECK(depth == 1000);
    rs_pickle_free(doc);
}

TEST(bytes_after_stop_are_ignored_as_pickle_loads_does)
{
    pb p = {{0}, 0};
    proto(&p, 2);
    op(&p, NONE);
    op(&p, STOP);
    put(&p, "trailing", 8);
    rs_pickle_doc *doc;
    const rs_pickle_value *r = decode(&p, &doc);
    CHECK(r && r->kind == RS_PICKLE_NONE);
    rs_pickle_free(doc);
}

/* ---- refusals ------------------------------------------------------------------------------ */

TEST(every_opcode_that_runs_code_is_refused_by_name)
{
    static const struct {
        unsigned char op;
        const char *name;
    } code[] = {{0x63, "GLOBAL"}, {0x93, "STACK_GLOBAL"}, {0x52, "REDUCE"}, {0x62, "BUILD"},
                {0x69, "INST"},   {0x6f, "OBJ"},          {0x81, "NEWOBJ"}, {0x92, "NEWOBJ_EX"},
                {0x82, "EXT1"},   {0x83, "EXT2"},         {0x84, "EXT4"},   {0x50, "PERSID"},
                {0x51, "BINPERSID"}};
    for (size_t i = 0; i < sizeof code / sizeof code[0]; i++) {
        pb p = {{0}, 0};
        proto(&p, 4);
        short_str(&p, "builtins");
        short_str(&p, "eval");
        op(&p, code[i].op);
        put(&p, "os\nsystem\n", 10);
        op(&p, STOP);
        char want[160];
        snprintf(want, sizeof want,
                 "offset 18: opcode %s (0x%02x) is refused: a snapshot never needs code execution",
                 code[i].name, code[i].op);
        expect_error(&p, want);
    }
}

TEST(a_python_pickle_with_a_global_is_refused)
{
    /* pickle.dumps(collections.OrderedDict(), protocol=2) */
    static const unsigned char od[] = "\x80\x02" "ccollections\nOrderedDict\nq\x00)Rq\x01.";
    pb p = {{0}, 0};
    put(&p, od, sizeof od - 1);
    expect_error(&p, "offset 2: opcode GLOBAL (0x63) is refused: a snapshot never needs code "
                     "execution");
}

TEST(protocol_0_text_opcodes_and_out_of_band_buffers_are_unsupported)
{
    static const unsigned char ops[] = {'I', 'L', 'F', 'S', 'T', 'U', 'V', 0x97, 0x98};
    for (size_t i = 0; i < sizeof ops; i++) {
        pb p = {{0}, 0};
        proto(&p, 5);
        op(&p, ops[i]);
        put(&p, "01\n", 3);
        op(&p, STOP);
        expect_error(&p, "is not supported");
    }
    pb p = {{0}, 0};
    proto(&p, 4);
    op(&p, 0xff);
    expect_error(&p, "offset 2: byte 0xff is not a pickle opcode");
}

TEST(broken_stack_discipline_is_a_format_error_naming_the_opcode)
{
    struct {
        const char *bytes;
        size_t n;
        const char *want;
    } cases[] = {
        {"\x80\x04" "a.", 4, "offset 2: APPEND needs 2 values on the stack, found 0"},
        {"\x80\x04" "](N" "a.", 6, "APPEND needs 2 values on the stack above the last MARK"},
        {"\x80\x04" "NNa.", 6, "APPEND needs a list under its item, found None"},
        {"\x80\x04" "]NNs.", 7, "SETITEM needs a dict under its key and value, found a list"},
        {"\x80\x04" "(NNNd.", 8, "DICT needs key/value pairs above its MARK, found 3 values"},
        {"\x80\x04" "}(Nu.", 7, "SETITEMS needs key/value pairs above its MARK, found 1 values"},
        {"\x80\x04" "e.", 4, "APPENDS needs a MARK before it"},
        {"\x80\x04" "(Ne.", 6, "APPENDS needs a list under its MARK, there is nothing there"},
        {"\x80\x04" "}(Ne.", 7, "APPENDS needs a list under its MARK, found a dict"},
        {"\x80\x04" "](N\x90.", 7, "ADDITEMS needs a set under its MARK, found a list"},
        {"\x80\x04" "}]Ns.", 7, "a dict key or set item must be hashable, found a list"},
        {"\x80\x04" "(}\x91.", 6, "must be hashable, found a dict"},
        {"\x80\x04" "h\x05.", 5, "offset 2: BINGET of memo key 5, which no PUT or MEMOIZE stored"},
        {"\x80\x04" "g12x\n.", 8, "GET expects a decimal memo key and a newline, found byte 0x78"},
        {"\x80\x04" "N\x94g\n.", 7, "GET has an empty memo key"},
        {"\x80\x04" "N\x94g1", 6, "truncated: GET's decimal argument has no newline"},
        {"\x80\x04" "\x94.", 4, "MEMOIZE needs 1 value on the stack, found 0"},
        {"\x80\x04" ".", 3, "STOP needs 1 value on the stack, found 0"},
        {"\x80\x04" "N(.", 5, "STOP needs 1 value on the stack above the last MARK, found 0"},
        {"\x80\x04" "\x86.", 4, "TUPLE2 needs 2 values on the stack, found 0"},
        {"\x80\x04" "1.", 4, "POP_MARK needs a MARK before it"},
        {"\x80\x04" "0.", 4, "POP needs 1 value on the stack, found 0"},
        {"\x80\x06" "N.", 4, "offset 0: pickle protocol 6 is not supported (5 is the highest)"},
        {"\x80\x04" "N", 3, "offset 3: truncated: the pickle ends without a STOP opcode"},
        {"\x80\x04" "\x8c\x02\xc3\x28.", 7, "offset 4: SHORT_BINUNICODE (at offset 2) holds invalid UTF-8"},
        {"\x80\x04" "\x8c\x02\xc0\x80.", 7, "holds invalid UTF-8: byte 0xc0"},
        {"\x80\x04" "\x8c\x04\xf4\x90\x80\x80.", 9, "holds invalid UTF-8: byte 0xf4"},
        /* the same with the input going on past the text (a short text is checked in one
         * 8-byte load then): the bad byte first of one, and last of eight */
        {"\x80\x04" "\x8c\x01\xff" "NNNNNNNN.", 14,
         "offset 4: SHORT_BINUNICODE (at offset 2) holds invalid UTF-8: byte 0xff"},
        {"\x80\x04" "\x8c\x08" "abcdefg\xff" "NNNNNNNN.", 21,
         "offset 11: SHORT_BINUNICODE (at offset 2) holds invalid UTF-8: byte 0xff"},
        {"\x80\x04" "\x8c\x02\xc3\x28" "NNNNNNNN.", 15,
         "offset 4: SHORT_BINUNICODE (at offset 2) holds invalid UTF-8"},
        {"\x80\x04" "\x8b\xff\xff\xff\xff.", 8, "LONG4 has a negative byte count"},
        {"\x80\x04" "\x8d\x00\x00\x00\x00\x00\x00\x00\x80.", 12,
         "truncated: BINUNICODE8 needs 9223372036854775808 bytes after it, only 1 remain"},
        {"\x80\x04" "\x95\xff\xff\xff\xff\xff\xff\xff\xff", 11,
         "truncated: FRAME needs 18446744073709551615 bytes after it, only 0 remain"},
        {"\x80\x04" "X\x05\x00\x00\x00" "ab.", 10, "BINUNICODE needs 5 bytes after it, only 3 remain"},
        {"\x80\x04" "J\x01\x02", 5, "BININT needs 4 bytes after it, only 2 remain"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pb p = {{0}, 0};
        put(&p, cases[i].bytes, cases[i].n);
        expect_error(&p, cases[i].want);
    }
    /* And the valid neighbours of some of these decode. */
    static const char *ok[] = {"\x80\x04" "(N1N.", "\x80\x04" "N(0.", "\x80\x04" "\x8c\x03\xed\xa0\x80.",
                               "\x80\x04" "\x8c\x04\xf0\x9f\x98\x80.",
                               /* ASCII texts followed by bytes above 0x7f (MEMOIZE, a 2-byte
                                * character): what comes after a text is not its own */
                               "\x80\x04" "\x8c\x01" "a\x94" "\x8c\x08" "abcdefgh\x94" "\x8c\x02\xc3\xa9\x87."};
    static const size_t ok_len[] = {7, 6, 8, 9, 23};
    for (size_t i = 0; i < 5; i++) {
        pb p = {{0}, 0};
        put(&p, ok[i], ok_len[i]);
        rs_pickle_doc *doc;
        CHECK(decode(&p, &doc) != NULL);
        rs_pickle_free(doc);
    }
}

/* ---- damaged input ------------------------------------------------------------------------- */

/* A small snapshot-shaped pickle using most opcodes, for the damage tests. */
static void sample(pb *p)
{
    proto(p, 4);
    op(p, FRAME);
    le(p, 0, 8);
    op(p, EMPTY_DICT);
    op(p, MEMOIZE);
    op(p, MARK);
    short_str(p, "segments");
    op(p, MEMOIZE);
    op(p, EMPTY_LIST);
    op(p, MEMOIZE);
    op(p, EMPTY_DICT);
    op(p, MEMOIZE);
    op(p, MARK);
    short_str(p, "address");
    op(p, MEMOIZE);
    op(p, LONG1);
    op(p, 6);
    put(p, "\x00\x00\x20\x7f\x7f\x00", 6);
    short_str(p, "total_size");
    op(p, MEMOIZE);
    op(p, BININT);
    le(p, 2 << 20, 4);
    short_str(p, "frames");
    op(p, MEMOIZE);
    op(p, EMPTY_LIST);
    op(p, MEMOIZE);
    op(p, EMPTY_DICT);
    op(p, MEMOIZE);
    op(p, MARK);
    short_str(p, "name");
    op(p, MEMOIZE);
    short_str(p, "forward");
    op(p, MEMOIZE);
    short_str(p, "line");
    op(p, MEMOIZE);
    op(p, BININT2);
    le(p, 300, 2);
    op(p, SETITEMS);
    op(p, APPEND);
    op(p, SETITEMS);
    op(p, APPEND);
    short_str(p, "device_traces");
    op(p, MEMOIZE);
    op(p, EMPTY_LIST);
    op(p, MEMOIZE);
    op(p, EMPTY_LIST);
    op(p, MEMOIZE);
    op(p, MARK);
    op(p, EMPTY_DICT);
    op(p, MEMOIZE);
    op(p, MARK);
    short_str(p, "action");
    op(p, MEMOIZE);
    short_str(p, "alloc");
    op(p, MEMOIZE);
    op(p, BINGET);
    op(p, 5);             /* "frames" */
    op(p, BINGET);
    op(p, 6);             /* the same frames list */
    short_str(p, "ok");
    op(p, NEWTRUE);
    short_str(p, "x");
    op(p, BINFLOAT);
    put(p, "\x40\x09\x21\xfb\x54\x44\x2d\x18", 8);
    op(p, SETITEMS);
    op(p, EMPTY_SET);
    op(p, MARK);
    binint1(p, 1);
    op(p, ADDITEMS);
    op(p, BINUNICODE);
    le(p, 3, 4);
    put(p, "abc", 3);
    op(p, SHORT_BINBYTES);
    op(p, 1);
    op(p, 0);
    binint1(p, 1);
    binint1(p, 2);
    op(p, TUPLE2);
    op(p, APPENDS);
    op(p, APPEND);
    op(p, SETITEMS);
    op(p, STOP);
}

TEST(every_truncation_is_a_format_error_naming_an_offset)
{
    pb p = {{0}, 0};
    sample(&p);
    rs_pickle_doc *doc;
    CHECK(decode(&p, &doc) != NULL);
    rs_pickle_free(doc);
    int bad = 0;
    for (size_t len = 0; len < p.n; len++) {
        doc = NULL;
        ranksnap_status st = rs_pickle_decode(p.b, len, "cut.pickle", &doc);
        if (st != RANKSNAP_ERR_FORMAT || doc != NULL ||
            strncmp(ranksnap_last_error(), "cut.pickle: offset ", 19) != 0) {
            if (bad++ < 5) fprintf(stderr, "length %zu: %s\n", len, ranksnap_last_error());
        }
        rs_pickle_free(doc);
        /* A copy of exactly `len` bytes, so that ASan sees any read past the end. */
        unsigned char *copy = malloc(len ? len : 1);
        memcpy(copy, p.b, len);
        doc = NULL;
        st = rs_pickle_decode(copy, len, "cut.pickle", &doc);
        if (st != RANKSNAP_ERR_FORMAT) bad++;
        rs_pickle_free(doc);
        free(copy);
    }
    CHECK(bad == 0);
}

TEST(every_bit_flip_decodes_or_fails_cleanly)
{
    pb p = {{0}, 0};
    sample(&p);
    size_t ok = 0, failed = 0, bad = 0;
    for (size_t i = 0; i < p.n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            unsigned char *copy = malloc(p.n);
            memcpy(copy, p.b, p.n);
            copy[i] ^= (unsigned char)(1u << bit);
            rs_pickle_doc *doc = NULL;
            ranksnap_status st = rs_pickle_decode(copy, p.n, "flip.pickle", &doc);
            if (st == RANKSNAP_OK && doc && rs_pickle_root(doc))
                ok++;
            else if (st == RANKSNAP_ERR_FORMAT && !doc &&
                     strncmp(ranksnap_last_error(), "flip.pickle: offset ", 20) == 0)
                failed++;
            else
                bad++;
            rs_pickle_free(doc);
            free(copy);
        }
    }
    CHECK(bad == 0);
    CHECK(ok > 0 && failed > 0);
}

TEST(memory_stays_bounded_by_the_input)
{
    /* 2,000 GETs of one list appended to itself: each adds a slot, none copies anything. */
    pb p = {{0}, 0};
    proto(&p, 4);
    op(&p, EMPTY_LIST);
    op(&p, MEMOIZE);
    op(&p, MARK);
    for (int i = 0; i < 2000; i++) {
        op(&p, BINGET);
        op(&p, 0);
    }
    op(&p, APPENDS);
    op(&p, STOP);
    rs_pickle_doc *doc;
    const rs_pickle_value *r = decode(&p, &doc);
    CHECK(r && rs_pickle_len(r) == 2000 && rs_pickle_item(r, 1999) == r);
    rs_pickle_free(doc);
}

/* ---- pickles Python wrote ------------------------------------------------------------------ */

/* Python's pickle.dumps(obj, protocol) of a PyTorch-like value, read back through a pipe. */
static unsigned char *python_pickle(const char *py, int protocol, size_t *len)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import pickle, sys\n"
             "p = %d\n"
             "frames = [{\"name\": \"forward\", \"filename\": \"/home/u/model.py\", \"line\": 31},\n"
             "          {\"name\": \"??\", \"filename\": \"??\", \"line\": 0}]\n"
             "shared = [1]\n"
             "v = {\"segments\": [{\"address\": 139637976727552, \"total_size\": 2097152,\n"
             "                    \"frames\": frames, \"blocks\": []}],\n"
             "     \"ints\": [0, 255, 65535, -1, 2**31, -2**31 - 1, 2**63 - 1, -2**63, 2**64 - 1, 2**70],\n"
             "     \"floats\": [1.5, -0.0], \"flags\": [True, False, None],\n"
             "     \"long_str\": \"x\" * 300, \"tuples\": [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4)],\n"
             "     \"shared\": [shared, shared], \"nested\": [[[[]]]], \"pool\": (0, 0)}\n"
             "if p >= 3: v[\"bytes\"] = b\"yy\"\n"
             "if p >= 4: v[\"sets\"] = [set([1]), frozenset([2])]\n"
             "if p >= 5: v[\"bytearray\"] = bytearray(b\"z\")\n"
             "sys.stdout.buffer.write(pickle.dumps(v, protocol=p))'",
             py, protocol);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    *len = buf ? fread(buf, 1, cap, f) : 0;
    if (pclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

TEST(pickles_written_by_python_decode_at_protocols_2_to_5)
{
    const char *py = find_python();
    if (!py) {
        printf("skip: no python3 to write pickles with\n");
        return;
    }
    for (int protocol = 2; protocol <= 5; protocol++) {
        size_t len = 0;
        unsigned char *buf = python_pickle(py, protocol, &len);
        CHECK(buf != NULL && len > 0);
        if (!buf) continue;
        rs_pickle_doc *doc = NULL;
        ranksnap_status st = rs_pickle_decode(buf, len, "python.pickle", &doc);
        if (st != RANKSNAP_OK) fprintf(stderr, "protocol %d: %s\n", protocol, ranksnap_last_error());
        CHECK(st == RANKSNAP_OK);
        const rs_pickle_value *r = rs_pickle_root(doc);
        CHECK(r && r->kind == RS_PICKLE_DICT);
        const rs_pickle_value *seg = rs_pickle_item(rs_pickle_dict_get(r, "segments"), 0);
        uint64_t addr = 0;
        CHECK(rs_pickle_get_u64(rs_pickle_dict_get(seg, "address"), &addr) == 0 && addr == 139637976727552ull);
        CHECK(rs_pickle_str_is(rs_pickle_dict_get(rs_pickle_item(rs_pickle_dict_get(seg, "frames"), 0), "filename"),
                        "/home/u/model.py"));
        const rs_pickle_value *ints = rs_pickle_dict_get(r, "ints");
        CHECK(rs_pickle_len(ints) == 10);
        static const int64_t want[] = {0, 255, 65535, -1, 2147483648, -2147483649, INT64_MAX,
                                       INT64_MIN};
        for (size_t i = 0; i < 8; i++) CHECK(is_int(rs_pickle_item(ints, i), want[i]));
        uint64_t u = 0;
        CHECK(rs_pickle_get_u64(rs_pickle_item(ints, 8), &u) == 0 && u == UINT64_MAX);
        CHECK(rs_pickle_item(ints, 9) && rs_pickle_item(ints, 9)->kind == RS_PICKLE_BIGINT);
        CHECK(rs_pickle_item(rs_pickle_dict_get(r, "floats"), 0)->v.f == 1.5);
        CHECK(rs_pickle_len(rs_pickle_dict_get(r, "long_str")) == 0 && rs_pickle_dict_get(r, "long_str")->v.str.n == 300);
        const rs_pickle_value *t = rs_pickle_dict_get(r, "tuples");
        for (size_t i = 0; i < 5; i++) CHECK(rs_pickle_len(rs_pickle_item(t, i)) == i);
        const rs_pickle_value *sh = rs_pickle_dict_get(r, "shared");
        CHECK(rs_pickle_item(sh, 0) == rs_pickle_item(sh, 1));
        CHECK(rs_pickle_dict_get(r, "pool") && rs_pickle_dict_get(r, "pool")->kind == RS_PICKLE_TUPLE);
        if (protocol >= 3) CHECK(is_text(rs_pickle_dict_get(r, "bytes"), RS_PICKLE_BYTES, "yy"));
        if (protocol >= 4) {
            const rs_pickle_value *sets = rs_pickle_dict_get(r, "sets");
            CHECK(rs_pickle_item(sets, 0)->kind == RS_PICKLE_SET && rs_pickle_item(sets, 1)->kind == RS_PICKLE_FROZENSET);
        }
        if (protocol >= 5) CHECK(is_text(rs_pickle_dict_get(r, "bytearray"), RS_PICKLE_BYTES, "z"));
        rs_pickle_free(doc);
        free(buf);
    }
}

/* ---- streaming (pickle.h: rs_pickle_stream) ------------------------------------------------- */

/* A trace of 2,500 entries as Python's pickle.dump writes it (batches of 1,000), with entry 500
 * holding a float and entry 1,700 a new frame dict, which the decoder's one-step entry reading
 * leaves to the opcode machine: every entry must reach the reader once, in order, and what it
 * keeps (rs_pickle_keep) must stay its own after the decode, whichever way it was read. */
#define STREAM_ENTRIES 2500

typedef struct kept {
    const rs_pickle_value *entry[STREAM_ENTRIES];
    size_t n;
    int bad;
} kept;

static ranksnap_status keep_entries(void *ctx, rs_pickle_taker *t, const rs_pickle_value *list,
                                    size_t index, const rs_pickle_value *const *items, size_t n)
{
    kept *k = ctx;
    (void)list;
    k->bad |= index != 0;
    for (size_t i = 0; i < n; i++) {
        if (k->n == STREAM_ENTRIES) {
            k->bad = 1;
            break;
        }
        if (!(k->entry[k->n++] = rs_pickle_keep(t, items[i]))) return RANKSNAP_ERR_HOST_MEMORY;
    }
    return RANKSNAP_OK;
}

static int int_at(const rs_pickle_value *dict, const char *key, int64_t want)
{
    int64_t got = 0;
    return rs_pickle_get_i64(rs_pickle_dict_get(dict, key), &got) == 0 && got == want;
}

TEST(streamed_entries_reach_the_reader_once_in_order_and_stay_as_kept)
{
    const char *py = find_python();
    if (!py) {
        printf("skip: no python3 to write pickles with\n");
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "%s -c 'import pickle, sys\n"
             "fr = [{\"name\": \"f%%d\" %% k, \"filename\": \"a.py\", \"line\": k} for k in range(3)]\n"
             "es = []\n"
             "for i in range(%d):\n"
             "    e = {\"action\": \"alloc\", \"addr\": 4096 * (i + 1), \"size\": 512 + i, \"stream\": 0,\n"
             "         \"time_us\": 1000 + i, \"frames\": [fr[i %% 3], fr[(i + 1) %% 3]]}\n"
             "    if i == 500: e[\"x\"] = 1.5\n"
             "    if i == 1700: e[\"frames\"] = [{\"name\": \"new\", \"filename\": \"b.py\", \"line\": 7}]\n"
             "    es.append(e)\n"
             "sys.stdout.buffer.write(pickle.dumps({\"segments\": [], \"device_traces\": [es]}, protocol=4))'",
             py, STREAM_ENTRIES);
    FILE *f = popen(cmd, "r");
    CHECK(f != NULL);
    if (!f) return;
    size_t cap = 1 << 20, len = 0;
    unsigned char *buf = malloc(cap);
    if (buf) len = fread(buf, 1, cap, f);
    CHECK(pclose(f) == 0 && buf && len > 0 && len < cap);
    kept *k = calloc(1, sizeof *k);
    CHECK(k != NULL);
    rs_pickle_stream stream = {.key = "device_traces", .take = keep_entries, .ctx = k};
    rs_pickle_doc *doc = NULL;
    CHECK(k && rs_pickle_decode_stream(buf, len, "stream.pickle", &stream, &doc) == RANKSNAP_OK);
    if (k && (k->n != STREAM_ENTRIES || k->bad)) fprintf(stderr, "     %zu entries, bad %d\n", k->n, k->bad);
    CHECK(k && k->n == STREAM_ENTRIES && !k->bad);
    int wrong = 0;
    for (size_t i = 0; k && i < k->n; i++) {
        const rs_pickle_value *e = k->entry[i];
        const rs_pickle_value *fr = rs_pickle_dict_get(e, "frames");
        const rs_pickle_value *f0 = rs_pickle_item(fr, 0);
        char name[8];
        snprintf(name, sizeof name, "f%zu", i % 3);
        int ok = int_at(e, "addr", 4096 * (int64_t)(i + 1)) && int_at(e, "size", 512 + (int64_t)i) &&
                 int_at(e, "time_us", 1000 + (int64_t)i) &&
                 rs_pickle_str_is(rs_pickle_dict_get(e, "action"), "alloc") &&
                 (i == 500) == (rs_pickle_dict_get(e, "x") != NULL);
        if (i == 1700)
            ok = ok && rs_pickle_len(fr) == 1 && rs_pickle_str_is(rs_pickle_dict_get(f0, "name"), "new");
        else
            ok = ok && rs_pickle_len(fr) == 2 && rs_pickle_str_is(rs_pickle_dict_get(f0, "name"), name) &&
                 int_at(rs_pickle_item(fr, 1), "line", (int64_t)((i + 1) % 3));
        if (!ok && wrong++ < 3) fprintf(stderr, "     entry %zu is not as written\n", i);
    }
    CHECK(wrong == 0);
    /* the root's list stays empty: its entries went to the reader */
    const rs_pickle_value *traces = rs_pickle_dict_get(rs_pickle_root(doc), "device_traces");
    CHECK(rs_pickle_len(traces) == 1 && rs_pickle_len(rs_pickle_item(traces, 0)) == 0);
    rs_pickle_free(doc);
    free(k);
    free(buf);
}

int main(void)
{
    RUN(scalars_of_every_opcode_decode_to_their_values);
    RUN(ints_of_every_width_keep_64_bit_values_and_flag_wider_ones);
    RUN(dicts_lists_tuples_and_sets_nest_as_python_builds_them);
    RUN(memo_get_shares_a_list_that_is_mutated_later);
    RUN(memoized_strings_and_self_references_are_one_value);
    RUN(deep_nesting_costs_no_c_stack);
    RUN(bytes_after_stop_are_ignored_as_pickle_loads_does);
    RUN(every_opcode_that_runs_code_is_refused_by_name);
    RUN(a_python_pickle_with_a_global_is_refused);
    RUN(protocol_0_text_opcodes_and_out_of_band_buffers_are_unsupported);
    RUN(broken_stack_discipline_is_a_format_error_naming_the_opcode);
    RUN(every_truncation_is_a_format_error_naming_an_offset);
    RUN(every_bit_flip_decodes_or_fails_cleanly);
    RUN(memory_stays_bounded_by_the_input);
    RUN(pickles_written_by_python_decode_at_protocols_2_to_5);
    RUN(streamed_entries_reach_the_reader_once_in_order_and_stay_as_kept);
    return check_summary();
}
