/*
 * device_share.c — this process's own device memory and the other processes on the device, from
 * NVML (device_share.h).
 *
 * NVML comes with the driver (libnvidia-ml.so.1), not with the toolkit: it is loaded with dlopen
 * at the first question, never linked, so that libranksnap.so loads where it is missing, and the
 * few calls and types used are declared here (its header is not needed). The device is found by
 * its UUID, which the CUDA runtime gives too: indexes differ between the two
 * (CUDA_VISIBLE_DEVICES renumbers CUDA's, never NVML's). Under MIG the runtime's UUID is the
 * instance's, which NVML spells "MIG-…".
 *
 * This process is found by its pid. In a container with its own pid namespace NVML answers with
 * the host's pids, which the process cannot see: it is then not found, and that is said rather
 * than guessed (one process listed is not proof that it is this one).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "device_share.h"
#include "format.h"
#include "log.h"

/* NVML's ABI, as its header declares it (nvml.h, API version 12 and later). */
#define RS_NVML_SUCCESS 0
#define RS_NVML_ERROR_NOT_FOUND 6
#define RS_NVML_ERROR_INSUFFICIENT_SIZE 7
/* usedGpuMemory when NVML has no figure for the process (NVML_VALUE_NOT_AVAILABLE) */
#define RS_NVML_VALUE_NOT_AVAILABLE 0xffffffffffffffffull

typedef struct rs_nvml_process {
    unsigned int pid;
    unsigned long long used; /* usedGpuMemory: every byte the process holds on the device */
    unsigned int gpu_instance, compute_instance;
} rs_nvml_process;

typedef int (*rs_nvml_init_fn)(void);
typedef const char *(*rs_nvml_error_fn)(int);
typedef int (*rs_nvml_by_uuid_fn)(const char *, void **);
typedef int (*rs_nvml_processes_fn)(void *, unsigned int *, rs_nvml_process *);

/* Processes asked for at first; more when NVML says there are more. */
#define RS_NVML_FIRST_ASK 64

static pthread_mutex_t rs_nvml_mu = PTHREAD_MUTEX_INITIALIZER;
static int rs_nvml_state; /* 0: not tried, 1: loaded and initialised, -1: not usable (rs_nvml_why) */
static int rs_nvml_why_code;
static char rs_nvml_why[200];
static rs_nvml_error_fn rs_nvml_error;
static rs_nvml_by_uuid_fn rs_nvml_by_uuid;
static rs_nvml_processes_fn rs_nvml_processes;

static const char *rs_nvml_says(int r)
{
    const char *s = rs_nvml_error ? rs_nvml_error(r) : NULL;
    return s ? s : "unknown error";
}

/* Loads and initialises NVML once; rs_nvml_mu held. */
static int rs_nvml_load(const char *library)
{
    if (rs_nvml_state) return rs_nvml_state > 0;
    rs_nvml_state = -1;
    rs_nvml_why_code = RS_OUTSIDE_WHY_NVML_UNUSABLE;
    if (!library || !*library || !strcmp(library, "none")) {
        rs_nvml_why_code = RS_OUTSIDE_WHY_NVML_OFF;
        snprintf(rs_nvml_why, sizeof rs_nvml_why, "NVML not asked (RANKSNAP_NVML=none)");
        return 0;
    }
    uint64_t t0 = rs_now_us();
    void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(rs_nvml_why, sizeof rs_nvml_why, "NVML not loaded: %.150s", e ? e : library);
        return 0;
    }
    rs_nvml_init_fn init = (rs_nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    rs_nvml_error = (rs_nvml_error_fn)dlsym(lib, "nvmlErrorString");
    rs_nvml_by_uuid = (rs_nvml_by_uuid_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID");
    rs_nvml_processes = (rs_nvml_processes_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
    int r = -1;
    if (!init || !rs_nvml_by_uuid || !rs_nvml_processes)
        snprintf(rs_nvml_why, sizeof rs_nvml_why,
                 "%.100s has no nvmlDeviceGetComputeRunningProcesses_v3 (an NVML older than the "
                 "R510 driver)", library);
    else if ((r = init()) != RS_NVML_SUCCESS)
        snprintf(rs_nvml_why, sizeof rs_nvml_why, "nvmlInit failed: %.150s", rs_nvml_says(r));
    if (r != RS_NVML_SUCCESS) {
        rs_nvml_error = NULL;
        dlclose(lib);
        return 0;
    }
    RS_INFO(RS_SUB_ALLOC, "NVML (%s) loaded and started in %.1f ms", library,
            (double)(rs_now_us() - t0) / 1000.0);
    /* kept for the process's life: the next question needs it, and NVML's own teardown at exit
     * is its business */
    rs_nvml_state = 1;
    return 1;
}

/* The device's NVML handle: by "GPU-…", else (a MIG instance) by "MIG-…". */
static int rs_nvml_device(const char *uuid, void **dev, char *why, size_t why_n)
{
    int r = rs_nvml_by_uuid(uuid, dev);
    if (r == RS_NVML_ERROR_NOT_FOUND && !strncmp(uuid, "GPU-", 4)) {
        char mig[64];
        snprintf(mig, sizeof mig, "MIG-%.56s", uuid + 4);
        r = rs_nvml_by_uuid(mig, dev);
    }
    if (r != RS_NVML_SUCCESS)
        snprintf(why, why_n, "NVML does not find %.48s: %.100s", uuid, rs_nvml_says(r));
    return r == RS_NVML_SUCCESS;
}

/* The processes with a context on `dev`, malloc'ed into *out; -1 (why filled) when NVML refuses. */
static int rs_nvml_list(void *dev, rs_nvml_process **out, char *why, size_t why_n)
{
    unsigned int n = RS_NVML_FIRST_ASK;
    for (int attempt = 0; attempt < 4; attempt++) {
        rs_nvml_process *v = calloc(n ? n : 1, sizeof *v);
        if (!v) {
            snprintf(why, why_n, "no host memory for NVML's list of processes");
            return -1;
        }
        unsigned int got = n;
        int r = rs_nvml_processes(dev, &got, v);
        if (r == RS_NVML_SUCCESS) {
            *out = v;
            return (int)got;
        }
        free(v);
        if (r != RS_NVML_ERROR_INSUFFICIENT_SIZE) {
            snprintf(why, why_n, "NVML does not list the device's processes: %.120s", rs_nvml_says(r));
            return -1;
        }
        /* processes came meanwhile: ask for what it said, and some room */
        n = got + 8;
    }
    snprintf(why, why_n, "NVML's list of the device's processes kept growing");
    return -1;
}

int rs_device_share_query(const char *library, const char *uuid, rs_device_share *out, char *why,
                          size_t why_n)
{
    memset(out, 0, sizeof *out);
    if (why_n) why[0] = '\0';
    pthread_mutex_lock(&rs_nvml_mu);
    void *dev = NULL;
    rs_nvml_process *v = NULL;
    int n = -1, code = RS_OUTSIDE_WHY_UNSAID;
    if (!rs_nvml_load(library)) {
        snprintf(why, why_n, "%s", rs_nvml_why);
        code = rs_nvml_why_code;
    } else if (!rs_nvml_device(uuid, &dev, why, why_n)) {
        code = RS_OUTSIDE_WHY_DEVICE_UNKNOWN;
    } else if ((n = rs_nvml_list(dev, &v, why, why_n)) < 0) {
        code = RS_OUTSIDE_WHY_NOT_LISTED;
    }
    pthread_mutex_unlock(&rs_nvml_mu);
    if (n < 0) return code;

    unsigned self = (unsigned)getpid();
    int found = 0, figure = 1;
    out->listed = 1;
    out->processes = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        int known = v[i].used != RS_NVML_VALUE_NOT_AVAILABLE;
        if (v[i].pid == self) {
            /* under MIG a process may be listed once per instance: its own is their sum */
            found = 1;
            figure &= known;
            if (known) out->own_bytes += v[i].used;
        } else if (known) {
            out->others_bytes += v[i].used;
        } else {
            out->others_unknown++;
        }
    }
    free(v);
    /* not found, none of them is known to be this one: no "others" to speak of */
    if (!found) out->others_bytes = out->others_unknown = 0;
    out->own_known = found && figure;
    code = !found ? RS_OUTSIDE_WHY_PID_NOT_LISTED : !figure ? RS_OUTSIDE_WHY_NO_FIGURE : code;
    if (!found)
        snprintf(why, why_n,
                 "this process (pid %u) is not among the %d process%s NVML lists on the device: "
                 "in a container with its own pid namespace NVML gives the host's pids (run it "
                 "with the host's: docker --pid=host, Kubernetes hostPID)",
                 self, n, n == 1 ? "" : "es");
    else if (!figure)
        snprintf(why, why_n, "NVML gives no figure for this process's memory on the device (MIG "
                             "without the privilege to see it?)");
    RS_TRACE(RS_SUB_ALLOC, "NVML on %s: %d process%s, this one %s", uuid, n, n == 1 ? "" : "es",
            out->own_known ? "found" : why);
    return code;
}
