/*
 * fuzz_pickle.c — libFuzzer target for the PyTorch snapshot reader: the pickle decoder
 * (collector/decode/pickle.c), the mapping onto rs_snap (collector/decode/torch_decode.c), the step
 * inference (collector/decode/steps_infer.c) and the summary of what was accepted (summary.c).
 *
 * Any input must either be rejected with RANKSNAP_ERR_FORMAT or decode into a snapshot that
 * passes the model's one check and summarises (fuzz_check.h); ASan/UBSan catch reads past the
 * buffer, leaks and overflows, libFuzzer's RSS and malloc limits allocations the input could not
 * back. The raw decoder runs on its own first, so that inputs which are valid pickles but no
 * snapshot still exercise every opcode; a snapshot both ways of reading the trace accept (streamed,
 * and from the value tree) must come out the same (snap_same.h), and the streamed trace's entries
 * read from their bytes or made as values must give the same outcome.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_check.h"
#include "pickle.h"
#include "snap_same.h"
#include "torch_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rs_pickle_doc *doc = NULL;
    ranksnap_status st = rs_pickle_decode(data, size, "fuzz", &doc);
    if (st == RANKSNAP_OK ? (doc == NULL || rs_pickle_root(doc) == NULL)
                          : (st != RANKSNAP_ERR_FORMAT || doc != NULL))
        abort();
    rs_pickle_free(doc);

    rs_torch_opts o;
    rs_torch_opts_default(&o);
    o.rank = (int)(size % 7);
    rs_snap *s = NULL, *values = NULL, *tree = NULL;
    st = rs_torch_decode(data, size, "fuzz", &o, &s);
    /* The trace's entries read from their bytes where they can be (torch_trace.h) and all made
     * as values: the reader reads an entry as the values' reader would or leaves it to it, so
     * both succeed alike, to the same model. */
    o.read_entries = 0;
    ranksnap_status st_values = rs_torch_decode(data, size, "fuzz", &o, &values);
    if ((st == RANKSNAP_OK) != (st_values == RANKSNAP_OK) ||
        (st == RANKSNAP_OK && snap_same(s, values) != NULL))
        abort();
    rs_snap_free(values);
    /* The trace streamed (entries run as one step where they can be) and read from the whole
     * value tree: streaming may refuse a layout the tree takes, but what both accept must be the
     * same model. */
    o.stream = 0;
    if (st == RANKSNAP_OK && rs_torch_decode(data, size, "fuzz", &o, &tree) == RANKSNAP_OK &&
        snap_same(s, tree) != NULL)
        abort();
    rs_snap_free(tree);
    fuzz_check_decoded(st, s);
    return 0;
}
