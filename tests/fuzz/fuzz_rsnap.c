/*
 * fuzz_rsnap.c — libFuzzer target for the .rsnap reader.
 *
 * Any input must either be rejected with RANKSNAP_ERR_FORMAT or decode into a snapshot whose
 * indexes are all in range (collector/model/snap_check.h); ASan/UBSan catch reads past the buffer, leaks and
 * overflows, libFuzzer's malloc limit catches allocations the input could not back.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "snap_check.h"
#include "rsnap_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rs_snap *s = NULL;
    ranksnap_status st = rs_rsnap_decode(data, size, "fuzz", &s);
    if (st == RANKSNAP_OK ? (s == NULL || rs_snap_check(s, "fuzz") != RANKSNAP_OK)
                          : (st != RANKSNAP_ERR_FORMAT || s != NULL))
        abort();
    rs_snap_free(s);
    return 0;
}
