/*
 * external_mode.c — which recorder a rank has (external_mode.h): RANKSNAP_RECORDER, read once,
 * and ranksnap_record_natively, the PyTorch glue's word that the framework's recorder cannot run
 * here (its cudaMallocAsync backend has none), given before ranksnap starts.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "errors.h"
#include "external_mode.h"
#include "log.h"
#include "pyframes.h"
#include "ranksnap.h"
#include "state.h"

/* ---- the mode ------------------------------------------------------------------------------ */

static atomic_int rs_ext_mode = -1; /* -1: not read yet */

int rs_external_mode(void)
{
    int m = atomic_load_explicit(&rs_ext_mode, memory_order_relaxed);
    if (m >= 0) return m;
    rs_options o;
    m = rs_options_load_one(&o, "RANKSNAP_RECORDER", NULL) == RANKSNAP_OK &&
        o.recorder == RS_RECORDER_TORCH;
    rs_error_clear();
    atomic_store_explicit(&rs_ext_mode, m, memory_order_relaxed);
    return m;
}

/* ---- ranksnap records the rank itself (ranksnap_record_natively) ---------------------------- */

static atomic_int rs_ext_native;
static char rs_ext_native_why[320]; /* written once, before rs_ext_native is set */

int rs_external_native(void)
{
    return atomic_load_explicit(&rs_ext_native, memory_order_acquire);
}

const char *rs_external_native_why(void)
{
    return rs_external_native() ? rs_ext_native_why : "";
}

int rs_external_pickles(void)
{
    return rs_external_mode() && !rs_external_native();
}

rs_stacks_mode rs_external_stacks_mode(rs_stacks_mode opt)
{
    if (!rs_external_mode() || !rs_external_native() || opt == RS_STACKS_NONE) return opt;
    return RS_STACKS_PYTHON;
}

ranksnap_status ranksnap_record_natively(const char *why)
{
    if (rs_state_forked()) return RANKSNAP_OK;
    if (!rs_external_mode())
        return rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_record_natively: RANKSNAP_RECORDER is not "
                        "torch: ranksnap records this process itself already");
    if (rs_state_get())
        return rs_error(RANKSNAP_ERR_UNSUPPORTED, "ranksnap_record_natively: ranksnap started already, "
                        "driving the framework's recorder; it records natively only from its start");
    if (!rs_external_native()) {
        /* PyTorch allocates on threads that released the GIL: their Python lines are read
         * without it, once the walk is found here (the glue calls with the GIL held); where it
         * cannot be, the file says so beside how the rank was recorded */
        char frames[160];
        int walk = rs_pyframes_calibrate(frames, sizeof frames) == 0;
        snprintf(rs_ext_native_why, sizeof rs_ext_native_why, "recorded at the CUDA runtime%s%.119s%s%s",
                 why && why[0] ? ": " : "", why ? why : "",
                 walk ? "" : "; Python lines only where the GIL is held, native stacks elsewhere: ",
                 walk ? "" : frames);
    }
    atomic_store_explicit(&rs_ext_native, 1, memory_order_release);
    RS_INFO(RS_SUB_RECORD, "%s", rs_ext_native_why);
    return RANKSNAP_OK;
}
