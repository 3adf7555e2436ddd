/*
 * reader_api.c — the exported face of libranksnap_reader.so (reader_api.h): the decoders of the
 * command, for a rank of a PyTorch job.
 */
#include "reader_api.h"
#include "rsnap_decode.h"
#include "torch_decode.h"

int ranksnap_reader_abi(void)
{
    return RS_READER_ABI;
}

ranksnap_status ranksnap_reader_decode(const void *buf, size_t len, const char *name, rs_snap **out)
{
    if (!rs_torch_is_pickle(buf, len)) return rs_rsnap_decode(buf, len, name, out);
    rs_torch_opts o;
    rs_torch_opts_default(&o);
    return rs_torch_decode(buf, len, name, &o, out);
}

const char *ranksnap_reader_last_error(void)
{
    return ranksnap_last_error();
}
