/*
 * pickler.c — the pickle writer (pickler.h): opcodes into a growing buffer.
 *
 * Opcode bytes and argument layouts are those of Python's Lib/pickle.py (protocol 2 to 4):
 * little-endian lengths and integers, BINFLOAT big-endian. A write that cannot grow the buffer
 * sets `failed` and every later call returns at once, so callers need not check each one.
 */
#include <stdlib.h>
#include <string.h>

#include "addr_hash.h"
#include "errors.h"
#include "pickler.h"

enum {
    OP_MARK = '(',
    OP_STOP = '.',
    OP_NONE = 'N',
    OP_BININT = 'J',
    OP_BININT1 = 'K',
    OP_BININT2 = 'M',
    OP_BINFLOAT = 'G',
    OP_BINUNICODE = 'X',
    OP_APPENDS = 'e',
    OP_BINGET = 'h',
    OP_LONG_BINGET = 'j',
    OP_EMPTY_LIST = ']',
    OP_EMPTY_DICT = '}',
    OP_SETITEMS = 'u',
    OP_PROTO = 0x80,
    OP_TUPLE2 = 0x86,
    OP_NEWTRUE = 0x88,
    OP_NEWFALSE = 0x89,
    OP_LONG1 = 0x8a,
    OP_SHORT_BINUNICODE = 0x8c,
    OP_MEMOIZE = 0x94,
};

void rs_pickler_init(rs_pickler *w)
{
    memset(w, 0, sizeof *w);
}

void rs_pickler_free(rs_pickler *w)
{
    free(w->buf);
    for (size_t i = 0; w->strs && i <= w->mask; i++) free(w->strs[i].s);
    free(w->strs);
    memset(w, 0, sizeof *w);
}

/* Room for `n` more bytes; 0 on success. */
static int reserve(rs_pickler *w, size_t n)
{
    if (w->failed) return -1;
    if (w->cap - w->len >= n) return 0;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap - w->len < n) {
        if (cap > SIZE_MAX / 2) {
            w->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    unsigned char *b = realloc(w->buf, cap);
    if (!b) {
        w->failed = 1;
        return -1;
    }
    w->buf = b;
    w->cap = cap;
    return 0;
}

static void put(rs_pickler *w, const void *p, size_t n)
{
    if (reserve(w, n) != 0) return;
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_byte(rs_pickler *w, unsigned c)
{
    unsigned char b = (unsigned char)c;
    put(w, &b, 1);
}

static void put_le(rs_pickler *w, uint64_t v, int n)
{
    unsigned char b[8];
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> (8 * i));
    put(w, b, (size_t)n);
}

void rs_pickler_proto(rs_pickler *w)
{
    put_byte(w, OP_PROTO);
    put_byte(w, 4);
}

void rs_pickler_stop(rs_pickler *w)
{
    put_byte(w, OP_STOP);
}

void rs_pickler_none(rs_pickler *w)
{
    put_byte(w, OP_NONE);
}

void rs_pickler_bool(rs_pickler *w, int v)
{
    put_byte(w, v ? OP_NEWTRUE : OP_NEWFALSE);
}

/* LONG1: a length byte, then the value in that many bytes of little-endian two's complement,
 * the fewest that keep its sign (Python's encode_long). `neg` extends `v` to 9 bytes. */
static void put_long1(rs_pickler *w, uint64_t v, int neg)
{
    unsigned char b[9];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    b[8] = neg ? 0xff : 0x00;
    int n = 9;
    /* Drop a top byte while the next one down still carries the sign. */
    while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) ||
                     (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
        n--;
    put_byte(w, OP_LONG1);
    put_byte(w, (unsigned)n);
    put(w, b, (size_t)n);
}

void rs_pickler_int(rs_pickler *w, int64_t v)
{
    if (v >= 0 && v <= 0xff) {
        put_byte(w, OP_BININT1);
        put_byte(w, (unsigned)v);
    } else if (v >= 0 && v <= 0xffff) {
        put_byte(w, OP_BININT2);
        put_le(w, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        put_byte(w, OP_BININT);
        put_le(w, (uint64_t)(uint32_t)(int32_t)v, 4);
    } else {
        put_long1(w, (uint64_t)v, v < 0);
    }
}

void rs_pickler_uint(rs_pickler *w, uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX)
        rs_pickler_int(w, (int64_t)v);
    else
        put_long1(w, v, 0);
}

void rs_pickler_float(rs_pickler *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(bits >> (8 * (7 - i)));
    put_byte(w, OP_BINFLOAT);
    put(w, b, 8);
}

/* Length of the valid UTF-8 sequence at s[0..n), 0 if it is not one (overlong forms, surrogates
 * and code points above U+10FFFF are invalid, as Python's decoder holds them). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* Writes the string's opcode, length and bytes, every invalid byte replaced by U+FFFD. */
static void put_str(rs_pickler *w, const char *str, size_t n)
{
    static const unsigned char repl[3] = {0xef, 0xbf, 0xbd};
    const unsigned char *s = (const unsigned char *)str;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        out += k ? k : sizeof repl;
        i += k ? k : 1;
    }
    if (out <= 0xff) {
        put_byte(w, OP_SHORT_BINUNICODE);
        put_byte(w, (unsigned)out);
    } else if (out <= 0xffffffffu) {
        put_byte(w, OP_BINUNICODE);
        put_le(w, out, 4);
    } else {
        /* Names of frames and files are never 4 GiB long; refuse rather than write BINUNICODE8,
         * which MemoryViz.js does not read. */
        w->failed = 1;
        return;
    }
    if (out == n) {
        put(w, s, n);
        return;
    }
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        if (k) {
            put(w, s + i, k);
            i += k;
        } else {
            put(w, repl, sizeof repl);
            i++;
        }
    }
}

void rs_pickler_str(rs_pickler *w, const char *s)
{
    put_str(w, s ? s : "", s ? strlen(s) : 0);
}

uint32_t rs_pickler_memoize(rs_pickler *w)
{
    put_byte(w, OP_MEMOIZE);
    return w->memo_next++;
}

void rs_pickler_get(rs_pickler *w, uint32_t idx)
{
    if (idx < 256) {
        put_byte(w, OP_BINGET);
        put_byte(w, idx);
    } else {
        put_byte(w, OP_LONG_BINGET);
        put_le(w, idx, 4);
    }
}

static uint64_t hash_bytes(const char *s, size_t n)
{
    return rs_bytes_hash(0, s, n); /* seeded: names come from the snapshot, a file (addr_hash.h) */
}

/* Doubles the string table (or makes the first one); 0 on success. */
static int strs_grow(rs_pickler *w)
{
    size_t cap = w->strs ? 2 * (w->mask + 1) : 256;
    rs_pickler_str_slot *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; w->strs && i <= w->mask; i++) {
        if (!w->strs[i].s) continue;
        size_t j = hash_bytes(w->strs[i].s, w->strs[i].len) & (cap - 1);
        while (t[j].s) j = (j + 1) & (cap - 1);
        t[j] = w->strs[i];
    }
    free(w->strs);
    w->strs = t;
    w->mask = cap - 1;
    return 0;
}

void rs_pickler_str_shared(rs_pickler *w, const char *s)
{
    if (w->failed) return;
    if (!s) s = "";
    size_t n = strlen(s);
    if ((!w->strs || 2 * (w->n_strs + 1) > w->mask + 1) && strs_grow(w) != 0) {
        w->failed = 1;
        return;
    }
    size_t j = hash_bytes(s, n) & w->mask;
    while (w->strs[j].s) {
        if (w->strs[j].len == n && memcmp(w->strs[j].s, s, n) == 0) {
            rs_pickler_get(w, w->strs[j].memo);
            return;
        }
        j = (j + 1) & w->mask;
    }
    char *copy = malloc(n + 1);
    if (!copy) {
        w->failed = 1;
        return;
    }
    memcpy(copy, s, n + 1);
    put_str(w, s, n);
    w->strs[j].s = copy;
    w->strs[j].len = n;
    w->strs[j].memo = rs_pickler_memoize(w);
    w->n_strs++;
}

void rs_pickler_tuple2(rs_pickler *w)
{
    put_byte(w, OP_TUPLE2);
}

void rs_pickler_list_open(rs_pickler *w, rs_pickler_seq *q)
{
    q->n = 0;
    q->is_dict = 0;
    put_byte(w, OP_EMPTY_LIST);
}

void rs_pickler_dict_open(rs_pickler *w, rs_pickler_seq *q)
{
    q->n = 0;
    q->is_dict = 1;
    put_byte(w, OP_EMPTY_DICT);
}

void rs_pickler_item(rs_pickler *w, rs_pickler_seq *q)
{
    if (q->n % RS_PICKLER_BATCH == 0) {
        if (q->n > 0) put_byte(w, q->is_dict ? OP_SETITEMS : OP_APPENDS);
        put_byte(w, OP_MARK);
    }
    q->n++;
}

void rs_pickler_close(rs_pickler *w, rs_pickler_seq *q)
{
    if (q->n > 0) put_byte(w, q->is_dict ? OP_SETITEMS : OP_APPENDS);
    q->n = 0;
}

ranksnap_status rs_pickler_finish(rs_pickler *w, unsigned char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (w->failed)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY,
                        "pickle writer: out of memory after %zu bytes (or a string over 4 GiB)",
                        w->len);
    *buf = w->buf;
    *len = w->len;
    w->buf = NULL;
    w->len = w->cap = 0;
    return RANKSNAP_OK;
}
