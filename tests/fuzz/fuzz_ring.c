/*
 * fuzz_ring.c — libFuzzer target for the ring decoder (collector/decode/ring_decode.c): what a
 * rank killed by SIGKILL leaves, read from a directory anyone may have written to.
 *
 * Any input must either be rejected with RANKSNAP_ERR_FORMAT or decode into a snapshot that
 * passes the model's one check (collector/model/snap_check.h) and summarises; ASan/UBSan catch
 * reads past the buffer and overflowing sums, libFuzzer's RSS and malloc limits (tests/fuzz/
 * CMakeLists.txt) allocations the input could not back.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "ring_decode.h"
#include "snap_check.h"
#include "summary.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rs_snap *s = NULL;
    ranksnap_status st = rs_ring_decode(data, size, "fuzz", &s);
    if (st == RANKSNAP_OK ? (s == NULL || rs_snap_check(s, "fuzz") != RANKSNAP_OK)
                          : (st != RANKSNAP_ERR_FORMAT || s != NULL))
        abort();
    if (s) {
        rs_summary sum;
        rs_summary_of(s, &sum);
    }
    rs_snap_free(s);
    return 0;
}
