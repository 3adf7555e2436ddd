/* utf8.h — what the JSON, HTML and pickle writers need to know of UTF-8. */
#ifndef RANKSNAP_UTF8_H
#define RANKSNAP_UTF8_H

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates, nothing
 * above U+10FFFF), 0 when it is not one. p is NUL-terminated: a short sequence fails on the NUL
 * before anything past it is read. */
static inline int rs_utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c >= 0xC2 && c <= 0xDF) return (p[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80) return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        if (p[1] < lo || p[1] > hi || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        return 4;
    }
    return 0;
}

#endif
