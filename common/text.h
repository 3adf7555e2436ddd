/*
 * text.h — the small string helpers every layer shares: byte counts for people, GPU UUIDs, file
 * names, fixed-size copies that never cut a UTF-8 character, UTF-8 validation, and the escaping
 * of what a terminal would obey.
 */
#ifndef RANKSNAP_TEXT_H
#define RANKSNAP_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Human-readable bytes, PyTorch style ("2.00 GiB", "512.00 KiB", "20 bytes"). */
void rs_text_format_bytes(uint64_t bytes, char *buf, size_t n);

/* A GPU's UUID as CUDA and NVML spell it: "GPU-" and its 16 bytes in hex, grouped 8-4-4-4-12. */
void rs_text_uuid_format(const uint8_t uuid[16], char *buf, size_t n);
/* The 16 bytes of "GPU-…" or "MIG-…" so spelled; 0 on success, -1 for anything else. */
int rs_text_uuid_parse(const char *s, uint8_t uuid[16]);

/* The part of `path` after its last '/'. */
const char *rs_text_basename(const char *path);

/* Copies `src` into dst[cap] (cap > 0), cutting at a UTF-8 character boundary when it does not
 * fit. */
void rs_text_copy_head(char *dst, size_t cap, const char *src);

/* As rs_text_copy_head, but keeps the end of a long path ("...rc/model/attention.c"): the file
 * name is the part a reader needs. cap must be at least 8. */
void rs_text_copy_tail(char *dst, size_t cap, const char *src);

/* Text that came from a file (host, job, function and file names, notes, error details) is
 * printed through these two: every byte a terminal would act on is written as \xHH instead — the
 * C0 controls (newline and tab too: one field must stay on one line), DEL, the C1 controls
 * U+0080..U+009F (an 8-bit CSI among them) and every byte that is not part of valid UTF-8 (a lone
 * 0x9b is CSI to a terminal that is not in UTF-8 mode). Printable ASCII and valid UTF-8 pass
 * unchanged, so ordinary names read as they are. */

/* Escapes `src` into dst[cap] (cap > 0), cut at a character boundary (never inside an escape)
 * when it does not fit; returns dst. */
const char *rs_text_escape(char *dst, size_t cap, const char *src);
/* Writes `src` escaped to `out`, whatever its length. */
void rs_text_put(FILE *out, const char *src);

/* Room for a tag (rs_text_file_tag), its NUL included. */
#define RS_TEXT_TAG_MAX 64
/* A name safe and short in a file name, the same for the same `s` in every process: letters,
 * digits and '-' as they are, every other byte as _XX (hex), so that distinct names stay
 * distinct; one longer than the room keeps its head and ends in -<16 hex digits> of a hash of the
 * whole name. cap is at least 18. Job ids and host names become parts of file names this way. */
void rs_text_file_tag(char *dst, size_t cap, const char *s);

/* Length of the valid UTF-8 sequence at p (2..4 bytes), 0 when p does not start one. Reads at
 * most up to the first byte that is not a continuation byte, so a NUL-terminated string is never
 * overrun. */
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
