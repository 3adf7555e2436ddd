/*
 * pickle_ops.c — the UTF-8 check of a pickle's str (pickle_ops.h), which the machine and the
 * reader of a trace entry's bytes both make.
 */
#include "pickle_ops.h"

/* UTF-8 as Python's "utf-8" codec with "surrogatepass" accepts it (what pickle uses for str):
 * no overlong forms, nothing above U+10FFFF, encoded surrogates allowed. Returns the offset of
 * the first bad byte within p, or n when all is well. */
size_t rs_pickle_utf8_bad_at(const unsigned char *p, size_t n)
{
    size_t i = 0;
    /* file paths and function names: ASCII, eight bytes at a time */
    while (n - i >= 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        if (x & 0x8080808080808080ull) break;
        i += 8;
    }
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k;
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            k = 1;
        } else if (c >= 0xe0 && c <= 0xef) {
            k = 2;
            if (c == 0xe0) lo = 0xa0;
        } else if (c >= 0xf0 && c <= 0xf4) {
            k = 3;
            if (c == 0xf0) lo = 0x90;
            if (c == 0xf4) hi = 0x8f;
        } else {
            return i;
        }
        if (k > n - i - 1) return i;
        if (p[i + 1] < lo || p[i + 1] > hi) return i;
        for (size_t j = 2; j <= k; j++)
            if ((p[i + j] & 0xc0) != 0x80) return i;
        i += k + 1;
    }
    return n;
}
