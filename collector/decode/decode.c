/*
 * decode.c — opening any snapshot file (decode.h): a ranksnap .rsnap or a PyTorch pickle, told
 * apart by their first bytes, a dead rank's .ring file, told by its name, and the rank a file's
 * name gives.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "decode.h"
#include "errors.h"
#include "file_map.h"
#include "file_read.h"
#include "ring_decode.h"
#include "rsnap_decode.h"
#include "text.h"
#include "torch_decode.h"

int rs_decode_is_ring_path(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && strcmp(path + n - 5, ".ring") == 0;
}

ranksnap_status rs_decode_file_ex(const char *path, const rs_torch_opts *opts, rs_snap **out,
                                  int *is_ring, int *closed)
{
    return rs_decode_file_how(path, opts, 0, out, is_ring, closed);
}

ranksnap_status rs_decode_file_how(const char *path, const rs_torch_opts *opts, int totals_only,
                                   rs_snap **out, int *is_ring, int *closed)
{
    if (!path || !out)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_decode_file: NULL argument");
    *out = NULL;
    int ring = rs_decode_is_ring_path(path), done = 0;
    if (is_ring) *is_ring = ring;
    if (closed) *closed = 0;
    if (ring) {
        ranksnap_status st = rs_ring_decode_file(path, out, &done);
        if (closed) *closed = done;
        return st;
    }
    rs_file_mapped m;
    RS_CHECK(rs_file_map(path, &m));
    rs_file_map_begin(&m);
    ranksnap_status st = rs_torch_is_pickle(m.p, m.len) ? rs_torch_decode(m.p, m.len, path, opts, out)
                         : totals_only ? rs_rsnap_decode_totals(m.p, m.len, path, out)
                                       : rs_rsnap_decode(m.p, m.len, path, out);
    if (rs_file_map_end()) {
        rs_snap_free(*out);
        *out = NULL;
        st = rs_error(RANKSNAP_ERR_IO, "%s: cut short while it was read (another process truncated "
                                       "or rewrote it): read it again once it is written", path);
    }
    rs_file_map_close(&m);
    return st;
}

ranksnap_status rs_decode_check_head(const char *path, const void *p, size_t len)
{
    uint64_t need = 0;
    if (rs_decode_is_ring_path(path)) return rs_ring_header_need(p, len, path, &need);
    return rs_torch_is_pickle(p, len) ? RANKSNAP_OK : rs_rsnap_check_head(p, len, path);
}

ranksnap_status rs_decode_file(const char *path, const rs_torch_opts *opts, rs_snap **out)
{
    return rs_decode_file_ex(path, opts, out, NULL, NULL);
}

int rs_decode_is_pickle_file(const char *path)
{
    unsigned char head[2];
    int fd = rs_file_open_regular(path);
    if (fd < 0) return 0;
    ssize_t n = read(fd, head, sizeof head);
    close(fd);
    return n > 0 && rs_torch_is_pickle(head, (size_t)n);
}

int rs_decode_rank_from_name(const char *path, int *rank)
{
    const char *base = rs_text_basename(path);
    int found = -1;
    for (const char *p = base; *p; p++) {
        if (strncasecmp(p, "rank", 4) != 0) continue;
        const char *q = p + 4;
        if (*q == '-' || *q == '_') q++;
        if (*q < '0' || *q > '9') continue;
        long v = 0;
        while (*q >= '0' && *q <= '9' && v <= INT32_MAX) v = v * 10 + (*q++ - '0');
        if (v >= INT32_MAX) continue;
        *rank = (int)v;
        found = 0;
    }
    return found;
}
