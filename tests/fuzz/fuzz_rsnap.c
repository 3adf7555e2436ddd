/*
 * fuzz_rsnap.c — libFuzzer target for the .rsnap reader.
 *
 * Any input must either be rejected with RANKSNAP_ERR_FORMAT or decode into a snapshot that
 * passes the model's one check and summarises (fuzz_check.h); ASan/UBSan catch reads past the
 * buffer, leaks and overflows, libFuzzer's RSS and malloc limits allocations the input could not
 * back.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_check.h"
#include "rsnap_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rs_snap *s = NULL;
    fuzz_check_decoded(rs_rsnap_decode(data, size, "fuzz", &s), s);
    return 0;
}
