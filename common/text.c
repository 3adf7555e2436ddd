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
