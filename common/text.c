/*
 * text.c — text.h's helpers.
 */
#include <stdio.h>
#include <string.h>

#include "text.h"

void rs_text_format_bytes(uint64_t bytes, char *buf, size_t n)
{
    /* PyTorch's format_size: the boundaries are inclusive, so 1024 is "1024 bytes". */
    if (bytes <= 1024)
        snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
    else if (bytes <= 1048576)
        snprintf(buf, n, "%.2f KiB", (double)bytes / 1024.0);
    else if (bytes <= 1073741824ull)
        snprintf(buf, n, "%.2f MiB", (double)bytes / 1048576.0);
    else
        snprintf(buf, n, "%.2f GiB", (double)bytes / 1073741824.0);
}

void rs_text_uuid_format(const uint8_t u[16], char *buf, size_t n)
{
    snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

static int rs_text_hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int rs_text_uuid_parse(const char *s, uint8_t uuid[16])
{
    if (!s || (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0)) return -1;
    /* the hex digits each group of 8-4-4-4-12 ends at */
    static const int group_end[] = {8, 12, 16, 20, 32};
    const char *p = s + 4;
    int digit = 0;
    for (size_t g = 0; g < sizeof group_end / sizeof group_end[0]; g++) {
        if (g && *p++ != '-') return -1;
        for (; digit < group_end[g]; digit++, p++) {
            int v = rs_text_hex_digit(*p);
            if (v < 0) return -1;
            if (digit % 2 == 0)
                uuid[digit / 2] = (uint8_t)(v << 4);
            else
                uuid[digit / 2] |= (uint8_t)v;
        }
    }
    return *p ? -1 : 0;
}

const char *rs_text_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void rs_text_copy_head(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

void rs_text_copy_tail(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n < cap) {
        memcpy(dst, src, n + 1);
        return;
    }
    const char *p = src + n - (cap - 4);
    while (*p && ((unsigned char)*p & 0xC0) == 0x80) p++;
    memcpy(dst, "...", 3);
    memcpy(dst + 3, p, strlen(p) + 1);
}

/* One character of `p` as it may be shown: `piece` gets it unchanged or as \xHH escapes (at most
 * 16 bytes); returns how many bytes of `p` it covers. */
static size_t escape_one(const unsigned char *p, char piece[17], size_t *piece_len)
{
    size_t n = 1;
    unsigned c = p[0];
    int plain = c >= 0x20 && c < 0x7f;
    if (c >= 0x80) {
        int u = rs_utf8_len(p);
        /* U+0080..U+009F are encoded C2 80..C2 9F: C1 controls, escaped like C0 */
        if (u > 0 && !(c == 0xC2 && p[1] < 0xA0)) plain = 1;
        n = u > 0 ? (size_t)u : 1;
    }
    if (plain) {
        memcpy(piece, p, n);
        *piece_len = n;
        return n;
    }
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        piece[k++] = '\\';
        piece[k++] = 'x';
        piece[k++] = hex[p[i] >> 4];
        piece[k++] = hex[p[i] & 15];
    }
    *piece_len = k;
    return n;
}

const char *rs_text_escape(char *dst, size_t cap, const char *src)
{
    size_t w = 0;
    const unsigned char *p = (const unsigned char *)src;
    while (*p) {
        char piece[17];
        size_t k;
        p += escape_one(p, piece, &k);
        if (w + k >= cap) break;
        memcpy(dst + w, piece, k);
        w += k;
    }
    dst[w] = '\0';
    return dst;
}

void rs_text_put(FILE *out, const char *src)
{
    const unsigned char *p = (const unsigned char *)src;
    while (*p) {
        /* runs of plain text in one call */
        const unsigned char *q = p;
        while (*q >= 0x20 && *q < 0x7f) q++;
        if (q > p) {
            fwrite(p, 1, (size_t)(q - p), out);
            p = q;
            continue;
        }
        char piece[17];
        size_t k;
        p += escape_one(p, piece, &k);
        fwrite(piece, 1, k, out);
    }
}

void rs_text_file_tag(char *dst, size_t cap, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t w = 0, i = 0;
    const unsigned char *p = (const unsigned char *)s;
    if (cap < 18) {
        if (cap) dst[0] = '\0';
        return;
    }
    /* the hash suffix needs 17 bytes: the head stops early enough to leave them */
    size_t room = cap - 18;
    for (; p[i]; i++) {
        unsigned c = p[i];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
        size_t k = keep ? 1 : 3;
        if (w + k > room) break;
        if (keep) {
            dst[w++] = (char)c;
        } else {
            dst[w++] = '_';
            dst[w++] = hex[c >> 4];
            dst[w++] = hex[c & 15];
        }
    }
    if (p[i]) {
        /* FNV-1a of the whole name: not seeded, the tag must be the same in every process */
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t j = 0; p[j]; j++) h = (h ^ p[j]) * 0x100000001b3ull;
        dst[w++] = '-';
        for (int b = 60; b >= 0; b -= 4) dst[w++] = hex[(h >> b) & 15];
    }
    dst[w] = '\0';
}
