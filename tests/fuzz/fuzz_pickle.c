/*
 * fuzz_pickle.c — libFuzzer target for the PyTorch snapshot reader: the pickle decoder
 * (collector/pickle.c), the mapping onto rsn_snapshot (collector/read_pickle.c), the step
 * inference (collector/infer_steps.c) and the summary of what was accepted (summarize.c).
 *
 * Any input must either be rejected with RANKSNAP_ERR_FORMAT or decode into a snapshot whose
 * indexes are all in range (model_check.h) and that summarizes; ASan/UBSan catch reads past the
 * buffer, leaks and overflows, libFuzzer's malloc limit catches allocations the input could not
 * back. The raw decoder runs on its own first, so that inputs which are valid pickles but no
 * snapshot still exercise every opcode.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "compare.h"
#include "model_check.h"
#include "pickle.h"
#include "read_pickle.h"
#include "read_rsnap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pk_doc *doc = NULL;
    ranksnap_status st = pk_decode(data, size, "fuzz", &doc);
    if (st == RANKSNAP_OK ? (doc == NULL || pk_root(doc) == NULL)
                          : (st != RANKSNAP_ERR_FORMAT || doc != NULL))
        abort();
    pk_free(doc);

    rsn_pickle_opts o;
    rsn_pickle_opts_default(&o);
    o.rank = (int)(size % 7);
    rsn_snapshot *s = NULL;
    st = rsn_decode_pickle(data, size, "fuzz", &o, &s);
    if (st == RANKSNAP_OK ? (s == NULL || !model_is_consistent(s))
                          : (st != RANKSNAP_ERR_FORMAT || s != NULL))
        abort();
    if (s) {
        rsc_summary sum;
        rsc_summarize(s, &sum);
    }
    rsn_free(s);
    return 0;
}
