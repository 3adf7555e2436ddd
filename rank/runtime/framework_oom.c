/*
 * framework_oom.c — an out-of-memory error the framework's allocator raised itself, in a rank
 * ranksnap records natively (ranksnap_framework_oom, include/ranksnap.h).
 *
 * PyTorch's cudaMallocAsync backend refuses a request over its own limit (the per-process memory
 * fraction) before it calls CUDA, so the driver's wrappers, which see every other refusal, never
 * see it, and that backend has no OOM observer: the glue reads the error that ends the script
 * and hands its figures and its traceback's frames here. They become the rank's OOM the way a
 * refusal of the driver's does (outside.c), and the snapshot is written at once, as for that one
 * (instance.c): the process is on its way out.
 */
#include "errors.h"
#include "external_mode.h"
#include "instance.h"
#include "log.h"
#include "options.h"
#include "outside.h"
#include "pyframes.h"
#include "ranksnap.h"
#include "state.h"

ranksnap_status ranksnap_framework_oom(const ranksnap_framework_oom_info *oom)
{
    if (rs_state_forked()) return RANKSNAP_OK;
    if (!oom || oom->n < 0 || (oom->n > 0 && (!oom->codes || !oom->lines)))
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_framework_oom: no error given, or "
                        "%d frames without their code objects and lines", oom ? oom->n : 0);
    if (!rs_external_native())
        return rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_framework_oom: ranksnap does not record "
                        "this rank itself (ranksnap_record_natively): the framework's own OOM "
                        "observer reports its OOMs");
    RS_NEED(rt);
    /* the frames a captured stack keeps: the innermost, and the outermost few of a deeper one */
    uintptr_t pcs[RS_MAX_STACK_DEPTH];
    int depth = rt->opts.stack_depth > 0 ? rt->opts.stack_depth : RS_MAX_STACK_DEPTH;
    int got = oom->n ? rs_pyframes_intern(oom->codes, oom->lines, oom->n, depth, pcs) : 0;
    if (got < 0)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "ranksnap_framework_oom: the frames' names are "
                        "read from the interpreter: call it holding the GIL (ctypes.PyDLL)");
    rs_oom_info said = {.requested = oom->requested,
                        .allocated = oom->allocated,
                        .memory_limit = oom->limit,
                        .device_free = oom->device_free,
                        .device_total = oom->device_total};
    if (!rs_outside_framework_oom(rt, &said, oom->device, oom->rounding, pcs, got)) {
        RS_INFO(RS_SUB_ALLOC, "the framework's out-of-memory error on device %d is the driver's "
                "refusal, recorded already", oom->device);
        return RANKSNAP_OK;
    }
    RS_INFO(RS_SUB_ALLOC, "the framework's own limit refused %llu bytes on device %d: out of memory",
            (unsigned long long)oom->requested, oom->device);
    rs_instance_oom_dump("the framework's own memory limit", oom->requested, oom->device);
    return RANKSNAP_OK;
}
