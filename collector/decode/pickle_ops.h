/*
 * pickle_ops.h — the few opcodes a PyTorch trace entry is made of, parsed from the input: for the
 * pickle machine (pickle.c, pickle_frames.c) and for the reader of streamed items' bytes
 * (torch_trace.c), which both read them where they run and must read them the same way. Each takes the bytes from the
 * opcode on (`left` of them) and returns the opcode's length, 0 when the bytes are not that
 * opcode whole. The UTF-8 check they share is pickle_ops.c's.
 */
#ifndef RANKSNAP_PICKLE_OPS_H
#define RANKSNAP_PICKLE_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* UTF-8 as Python's "utf-8" codec with "surrogatepass" accepts it (what pickle uses for str):
 * no overlong forms, nothing above U+10FFFF, encoded surrogates allowed. Returns the offset of
 * the first bad byte within p, or n when all is well. */
size_t rs_pickle_utf8_bad_at(const unsigned char *p, size_t n);

/* Inlined where they are read: a call for each of a trace entry's opcodes cost the reader 4%. */
#if defined(__GNUC__)
#define RS_PK_INLINE static inline __attribute__((always_inline))
#else
#define RS_PK_INLINE static inline
#endif

/* rs_pickle_utf8_bad_at(p, n) == n, with a text of 1 to 8 ASCII bytes (a trace entry's "alloc" and "N/A",
 * a key) read in one load when eight bytes can be read from p (`room`: the input goes on after
 * the text), the bytes after it masked off: a byte at a time, such texts cost the machine 7%. */
RS_PK_INLINE int rs_pk_utf8_ok(const unsigned char *p, size_t n, size_t room)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n - 1 < 8 && room >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        if (!(x & 0x8080808080808080ull & (~0ull >> (8 * (8 - n))))) return 1;
    }
#else
    (void)room;
#endif
    return rs_pickle_utf8_bad_at(p, n) == n;
}

/* The int opcode at b (BININT1, BININT2, BININT or LONG1 of 1 to 8 bytes, `left` bytes there):
 * its length, its value's 64 bits in *x (two's complement); 0 when it is none of those. */
RS_PK_INLINE size_t rs_pk_int(const unsigned char *b, size_t left, uint64_t *x)
{
    if (left >= 2 && b[0] == 0x4b) {
        *x = b[1];
        return 2;
    }
    if (left >= 3 && b[0] == 0x4d) {
        *x = (uint64_t)b[1] | (uint64_t)b[2] << 8;
        return 3;
    }
    if (left >= 5 && b[0] == 0x4a) {
        *x = (uint64_t)(int64_t)(int32_t)((uint32_t)b[1] | (uint32_t)b[2] << 8 |
                                          (uint32_t)b[3] << 16 | (uint32_t)b[4] << 24);
        return 5;
    }
    if (left < 2 || b[0] != 0x8a || b[1] < 1 || b[1] > 8 || left - 2 < b[1]) return 0;
    uint64_t v = 0;
    if (left >= 10) { /* eight bytes there to load at once (little-endian), the rest cut */
        const unsigned char *w = b + 2;
        v = (uint64_t)w[0] | (uint64_t)w[1] << 8 | (uint64_t)w[2] << 16 | (uint64_t)w[3] << 24 |
            (uint64_t)w[4] << 32 | (uint64_t)w[5] << 40 | (uint64_t)w[6] << 48 | (uint64_t)w[7] << 56;
        if (b[1] < 8) v &= ((uint64_t)1 << (8 * b[1])) - 1;
    } else {
        for (unsigned k = 0; k < b[1]; k++) v |= (uint64_t)b[2 + k] << (8 * k);
    }
    if ((b[1 + b[1]] & 0x80) && b[1] < 8) v |= ~(uint64_t)0 << (8 * b[1]);
    *x = v;
    return 2 + (size_t)b[1];
}

/* A memo GET (BINGET, LONG_BINGET): its key in *key. */
RS_PK_INLINE size_t rs_pk_get(const unsigned char *b, size_t left, uint64_t *key)
{
    if (left >= 2 && b[0] == 0x68) {
        *key = b[1];
        return 2;
    }
    if (left >= 5 && b[0] == 0x6a) {
        *key = (uint64_t)b[1] | (uint64_t)b[2] << 8 | (uint64_t)b[3] << 16 | (uint64_t)b[4] << 24;
        return 5;
    }
    return 0;
}

/* A str (SHORT_BINUNICODE, BINUNICODE) whose text is UTF-8: the text in *text, *n bytes. */
RS_PK_INLINE size_t rs_pk_str(const unsigned char *b, size_t left, const char **text, size_t *n)
{
    size_t head, size;
    if (left >= 2 && b[0] == 0x8c) {
        head = 2;
        size = b[1];
    } else if (left >= 5 && b[0] == 0x58) {
        head = 5;
        size = (size_t)b[1] | (size_t)b[2] << 8 | (size_t)b[3] << 16 | (size_t)b[4] << 24;
    } else {
        return 0;
    }
    if (size > left - head || !rs_pk_utf8_ok(b + head, size, left - head)) return 0;
    *text = (const char *)b + head;
    *n = size;
    return head + size;
}

#endif
