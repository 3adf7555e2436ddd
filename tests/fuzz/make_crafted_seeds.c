/*
 * make_crafted_seeds.c — the crafted inputs of tests/unit/crafted_inputs.h, small, as seeds of
 * the three fuzz targets: libFuzzer mutates from files that already aim at the decoders' tables
 * and sums, as the hostile tests did by hand.
 * Usage: make_crafted_seeds RING_DIR PICKLE_DIR RSNAP_DIR
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "crafted_inputs.h"

static int put(const char *dir, const char *name, unsigned char *buf, size_t len)
{
    char path[4096];
    if (!buf) {
        fprintf(stderr, "make_crafted_seeds: out of memory making %s\n", name);
        return 1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(buf, 1, len, f) != len;
    if (f && fclose(f) != 0) bad = 1;
    if (bad) fprintf(stderr, "make_crafted_seeds: %s: cannot write\n", path);
    free(buf);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s RING_DIR PICKLE_DIR RSNAP_DIR\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < 4; i++)
        if (mkdir(argv[i], 0700) != 0 && errno != EEXIST) {
            perror(argv[i]);
            return 1;
        }
    size_t n = 0;
    int bad = 0;
    bad |= put(argv[1], "crafted-frees.ring", crafted_ring_frees(64, &n), n);
    bad |= put(argv[1], "crafted-overflow.ring", crafted_ring_overflow(&n), n);
    bad |= put(argv[1], "crafted-annotations.ring", crafted_ring_annotations(&n), n);
    bad |= put(argv[2], "crafted-addresses.pickle", crafted_pickle_addresses(64, &n), n);
    bad |= put(argv[2], "crafted-streams.pickle", crafted_pickle_streams(64, &n), n);
    bad |= put(argv[2], "crafted-lines.pickle", crafted_pickle_lines(64, 8, &n), n);
    bad |= put(argv[2], "crafted-memo.pickle", crafted_pickle_memo(64, &n), n);
    bad |= put(argv[3], "crafted-lengths.rsnap", crafted_rsnap_lengths(256, &n), n);
    bad |= put(argv[3], "crafted-deep.rsnap", crafted_rsnap_deep(4096, &n), n);
    return bad;
}
