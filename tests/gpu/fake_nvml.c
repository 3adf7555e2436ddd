/*
 * fake_nvml.c — a stand-in for NVML (libnvidia-ml.so.1) on machines without a GPU: it lists the
 * processes of fake_cudart.c's shared devices (FAKE_CUDA_SHARED, fake_share.h) with what each
 * holds, as nvmlDeviceGetComputeRunningProcesses_v3 does, so that a rank's own device memory and
 * the other processes on its device are tested in CI (label mpi).
 *
 * Only what rank/runtime/device_share.c calls, with NVML's ABI (nvml.h): nvmlInit_v2,
 * nvmlErrorString, nvmlDeviceGetHandleByUUID (the fake runtime's UUIDs: first byte device + 1, the
 * rest 0) and the process list. nvmlInit_v2 fails as on a machine without the driver when
 * FAKE_CUDA_SHARED is not set. What real machines do besides:
 *   FAKE_NVML_PID_OFFSET=N    every pid is listed N higher, as in a container whose pid
 *                             namespace is not the host's
 *   FAKE_NVML_NO_FIGURE=1     every process is listed without a figure (NVML_VALUE_NOT_AVAILABLE),
 *                             as under MIG without the privilege
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_share.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

enum { NV_SUCCESS = 0, NV_INVALID_ARGUMENT = 2, NV_NOT_FOUND = 6, NV_INSUFFICIENT_SIZE = 7,
       NV_DRIVER_NOT_LOADED = 9 };

typedef struct nv_process {
    unsigned int pid;
    unsigned long long used;
    unsigned int gpu_instance, compute_instance;
} nv_process;

FAKE_EXPORT int nvmlInit_v2(void);
FAKE_EXPORT const char *nvmlErrorString(int r);
FAKE_EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev);
FAKE_EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, nv_process *v);

FAKE_EXPORT int nvmlInit_v2(void)
{
    return fake_share_map() ? NV_SUCCESS : NV_DRIVER_NOT_LOADED;
}

FAKE_EXPORT const char *nvmlErrorString(int r)
{
    switch (r) {
    case NV_SUCCESS: return "Success";
    case NV_INVALID_ARGUMENT: return "Invalid Argument";
    case NV_NOT_FOUND: return "Not Found";
    case NV_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NV_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

/* "GPU-0d000000-0000-0000-0000-000000000000": fake device d - 1, the handle d. */
FAKE_EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev)
{
    static const char zeros[] = "000000-0000-0000-0000-000000000000";
    if (!uuid || !dev) return NV_INVALID_ARGUMENT;
    if (strncmp(uuid, "GPU-0", 5) != 0 || uuid[5] < '1' || uuid[5] > '0' + FAKE_SHARE_DEVICES ||
        strcmp(uuid + 6, zeros) != 0)
        return NV_NOT_FOUND;
    *dev = (void *)(uintptr_t)(uuid[5] - '0');
    return NV_SUCCESS;
}

FAKE_EXPORT int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, nv_process *v)
{
    fake_share *t = fake_share_map();
    uintptr_t d = (uintptr_t)dev;
    if (!t || !count || d < 1 || d > FAKE_SHARE_DEVICES) return NV_INVALID_ARGUMENT;
    const char *off = getenv("FAKE_NVML_PID_OFFSET");
    const char *none = getenv("FAKE_NVML_NO_FIGURE");
    unsigned int n = 0;
    for (int i = 0; i < FAKE_SHARE_PROCESSES; i++) {
        uint32_t pid = atomic_load(&t->pid[i]);
        uint64_t bytes = atomic_load(&t->bytes[i][d - 1]);
        if (!pid || !bytes) continue;
        if (n < *count && v) {
            v[n].pid = pid + (unsigned)(off ? atoi(off) : 0);
            v[n].used = none && !strcmp(none, "1") ? ~0ull : bytes;
            v[n].gpu_instance = v[n].compute_instance = 0xffffffffu;
        }
        n++;
    }
    int r = n <= *count ? NV_SUCCESS : NV_INSUFFICIENT_SIZE;
    *count = n;
    return r;
}
