/*
 * rsnap_scan.c — the .rsnap decoder's first pass: it walks the raw msgpack structure, finds
 * where the top-level map ends (so that truncation and trailing bytes get their own messages),
 * checks that every array or map count could fit in the bytes that remain, bounds the nesting,
 * and notes where each map entry starts and each map ends. After it, every value the second
 * pass reads lies inside the buffer.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "file_read.h"
#include "rsnap_decode.h"
#include "snap_check.h"
#include "rsnap_scan.h"

ranksnap_status rs_rd_fail(const dec *d, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return rs_error(RANKSNAP_ERR_FORMAT, "%s: %s", d->name, msg);
}

ranksnap_status rs_rd_no_memory(const dec *d, const char *what, size_t n)
{
    return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for %zu entries of %s", d->name, n,
                    what);
}

static kind kind_of(unsigned char b)
{
    if (b <= 0x7f || b >= 0xe0 || (b >= 0xcc && b <= 0xd3)) return K_INT;
    if (b <= 0x8f || b == 0xde || b == 0xdf) return K_MAP;
    if (b <= 0x9f || b == 0xdc || b == 0xdd) return K_ARRAY;
    if (b <= 0xbf || (b >= 0xd9 && b <= 0xdb)) return K_STR;
    switch (b) {
    case 0xc0: return K_NIL;
    case 0xc1: return K_C1;
    case 0xc2:
    case 0xc3: return K_BOOL;
    case 0xc4:
    case 0xc5:
    case 0xc6: return K_BIN;
    case 0xca:
    case 0xcb: return K_FLOAT;
    }
    return K_EXT;
}

const char *rs_rd_type_of_byte(unsigned char b)
{
    static const char *const names[] = {
        "a msgpack integer", "a msgpack map", "a msgpack array", "a msgpack string", "msgpack nil",
        "a msgpack boolean", "msgpack binary", "a msgpack float",
        "the byte 0xc1 (never valid in msgpack)", "a msgpack extension"};
    return names[kind_of(b)];
}

const char *rs_rd_type_name(unsigned char b)
{
    static const char *const names[] = {"an integer", "a map", "an array", "a string", "nil",
                                        "a boolean", "binary", "a float", "an extension",
                                        "an extension"};
    return names[kind_of(b)];
}

static ranksnap_status truncated(const dec *d)
{
    return rs_rd_fail(d, "truncated: %zu bytes, the msgpack map ends beyond the end of the file",
                d->len);
}

int rs_rd_read_be(const dec *d, size_t *pos, unsigned n, uint64_t *v)
{
    if (n > d->len - *pos) return -1;
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++) x = (x << 8) | d->buf[*pos + i];
    *pos += n;
    *v = x;
    return 0;
}

/* Bytes taken by the scalar whose first byte is the index (integers, nil, booleans, short
 * strings); 0 for everything else, which the general path of scan reads. */
static const unsigned char scalar_size[256] = {
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16,
    17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
     1,  0,  1,  1,  0,  0,  0,  0,  0,  0,  0,  0,  2,  3,  5,  9,
     2,  3,  5,  9,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
     1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,  1,
};

/* Appends x to a growing array of offsets. */
static int offsets_push(size_t **v, size_t *n, size_t *cap, size_t x)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 256;
        size_t *g = realloc(*v, c * sizeof *g);
        if (!g) return -1;
        *v = g;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return 0;
}

static int note_map(dec *d, size_t at, uint64_t items)
{
    if (d->n_maps == d->maps_cap) {
        size_t cap = d->maps_cap ? 2 * d->maps_cap : 64;
        map_rec *m = realloc(d->maps, cap * sizeof *m);
        if (!m) return -1;
        d->maps = m;
        d->maps_cap = cap;
    }
    d->maps[d->n_maps++] = (map_rec){at, at, d->n_ents, (uint32_t)(items / 2)};
    return 0;
}

/* A map ended at `end`: its entries, the last ones of the open maps' stack (a nested map's were
 * moved out when it ended), move to ents in one piece. */
static int close_map(dec *d, size_t index, size_t open_from, size_t end)
{
    map_rec *m = &d->maps[index];
    m->end = end;
    m->first = d->n_ents;
    for (size_t i = open_from; i < d->n_open; i++)
        if (offsets_push(&d->ents, &d->n_ents, &d->ents_cap, d->open[i]) != 0) return -1;
    d->n_open = open_from;
    return 0;
}

ranksnap_status rs_rd_scan(dec *d, size_t *end)
{
    uint64_t left[RSNAP_MAX_DEPTH + 1];
    size_t map_of[RSNAP_MAX_DEPTH + 1];    /* index + 1 of the map read at each level, 0: none */
    size_t open_from[RSNAP_MAX_DEPTH + 1]; /* where its entries start in d->open */
    size_t depth = 0, pos = 0;
    uint64_t pending = 1;
    left[0] = 1;
    map_of[0] = 0;
    while (pending > 0) {
        while (left[depth] == 0) {
            if (map_of[depth] && close_map(d, map_of[depth] - 1, open_from[depth], pos) != 0)
                return rs_rd_no_memory(d, "map entries", d->n_ents);
            depth--;
        }
        if (!map_of[depth]) {
            /* an array (a history column): its scalars are stepped over in a tight loop, eight
             * at a time while they are one-byte positive integers (actions, streams, stacks) */
            uint64_t k = left[depth];
            while (k >= 8 && d->len - pos >= 8) {
                uint64_t x;
                memcpy(&x, d->buf + pos, 8);
                if (x & 0x8080808080808080ull) break;
                pos += 8;
                k -= 8;
            }
            while (k > 0 && pos < d->len) {
                unsigned sz = scalar_size[d->buf[pos]];
                if (sz == 0 || sz > d->len - pos) break;
                pos += sz;
                k--;
            }
            pending -= left[depth] - k;
            left[depth] = k;
            if (k == 0) continue;
        }
        if (pos >= d->len) return truncated(d);
        size_t at = pos;
        unsigned char b = d->buf[pos++];
        uint64_t skip = 0, items = 0, x = 0;
        int container = 0, is_map = 0, bad = 0;
        left[depth]--;
        pending--;
        if (map_of[depth] && offsets_push(&d->open, &d->n_open, &d->open_cap, at) != 0)
            return rs_rd_no_memory(d, "map entries", d->n_open);
        if (b <= 0x7f || b >= 0xe0) {
            /* fixint */
        } else if (b <= 0x8f) {
            items = 2u * (b & 0x0fu);
            container = is_map = 1;
        } else if (b <= 0x9f) {
            items = b & 0x0fu;
            container = 1;
        } else if (b <= 0xbf) {
            skip = b & 0x1fu;
        } else {
            switch (b) {
            case 0xc0: case 0xc2: case 0xc3: break;
            case 0xc1:
                return rs_rd_fail(d, "byte 0xc1 at offset %zu is not valid msgpack", at);
            case 0xc4: case 0xd9: bad = rs_rd_read_be(d, &pos, 1, &skip); break;
            case 0xc5: case 0xda: bad = rs_rd_read_be(d, &pos, 2, &skip); break;
            case 0xc6: case 0xdb: bad = rs_rd_read_be(d, &pos, 4, &skip); break;
            case 0xc7: bad = rs_rd_read_be(d, &pos, 1, &x); skip = x + 1; break;
            case 0xc8: bad = rs_rd_read_be(d, &pos, 2, &x); skip = x + 1; break;
            case 0xc9: bad = rs_rd_read_be(d, &pos, 4, &x); skip = x + 1; break;
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: skip = 4; break;
            case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc: bad = rs_rd_read_be(d, &pos, 2, &items); container = 1; break;
            case 0xdd: bad = rs_rd_read_be(d, &pos, 4, &items); container = 1; break;
            case 0xde: bad = rs_rd_read_be(d, &pos, 2, &items); items *= 2; container = is_map = 1; break;
            case 0xdf: bad = rs_rd_read_be(d, &pos, 4, &items); items *= 2; container = is_map = 1; break;
            }
        }
        if (bad || skip > d->len - pos) return truncated(d);
        pos += skip;
        if (container && items > 0 && (items > d->len - pos || pending + items > d->len - pos))
            return truncated(d);
        if (is_map && note_map(d, at, items) != 0) return rs_rd_no_memory(d, "maps", d->n_maps);
        if (container && items > 0) {
            if (depth == RSNAP_MAX_DEPTH)
                return rs_rd_fail(d, "msgpack nested deeper than %d levels at offset %zu",
                            RSNAP_MAX_DEPTH, at);
            pending += items;
            left[++depth] = items;
            map_of[depth] = is_map ? d->n_maps : 0;
            open_from[depth] = d->n_open;
        } else if (is_map) {
            d->maps[d->n_maps - 1].end = pos;
        }
    }
    for (; depth > 0; depth--)
        if (map_of[depth] && close_map(d, map_of[depth] - 1, open_from[depth], pos) != 0)
            return rs_rd_no_memory(d, "map entries", d->n_ents);
    *end = pos;
    return RANKSNAP_OK;
}
