/*
 * make_seed.c — writes the fuzzer's seed corpus: the snapshot test fixture encoded with and
 * without a recorder, so that mutation starts from files that reach every section of the reader.
 * Usage: fuzz_rsnap_make_seed DIR
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "atomic_file.h"
#include "unit/snapshot_fixture.h"

static int write_seed(const char *dir, const char *name, int with_recorder)
{
    fixture f;
    size_t len;
    char path[4096];
    if (fixture_init(&f, with_recorder) != 0) {
        fprintf(stderr, "make_seed: fixture: %s\n", ranksnap_last_error());
        return 1;
    }
    char *buf = fixture_encode(&f, &len);
    fixture_free(&f);
    if (!buf) {
        fprintf(stderr, "make_seed: encode: %s\n", ranksnap_last_error());
        return 1;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ranksnap_status st = rs_atomic_file_write(path, buf, len);
    free(buf);
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "make_seed: %s\n", ranksnap_last_error());
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    if (mkdir(argv[1], 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "make_seed: %s: mkdir failed: %s\n", argv[1], strerror(errno));
        return 1;
    }
    int bad = write_seed(argv[1], "seed-recorder.rsnap", 1);
    bad |= write_seed(argv[1], "seed-plain.rsnap", 0);
    return bad;
}
