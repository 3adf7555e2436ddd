/*
 * fuzz_ring.c — libFuzzer target for the ring decoder (collector/decode/ring_decode.c): what a
 * rank killed by SIGKILL leaves, read from a directory anyone may have written to.
 *
 * Any input must either be rejected with RANKSNAP_ERR_FORMAT or decode into a snapshot that
 * passes the model's one check and summarises (fuzz_check.h); ASan/UBSan catch
 * reads past the buffer and overflowing sums, libFuzzer's RSS and malloc limits (tests/fuzz/
 * CMakeLists.txt) allocations the input could not back.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_check.h"
#include "ring_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rs_snap *s = NULL;
    fuzz_check_decoded(rs_ring_decode(data, size, "fuzz", &s), s);
    return 0;
}
