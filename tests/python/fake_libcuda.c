/*
 * fake_libcuda.c — a stand-in for the CUDA driver (libcuda.so.1) in the CI tests of what a
 * preloaded ranksnap says at exit about a process it never started in: the few driver calls that
 * check makes, with the driver's answers for a process that never initialised it, one that only
 * counted the devices (a launcher), and one that made a context (rank/runtime/outside.c).
 * Two devices; cuDevicePrimaryCtxRetain makes a device's primary context active.
 */
#include <stddef.h>

#define FAKE_SUCCESS 0
#define FAKE_NOT_INITIALIZED 3
#define FAKE_INVALID_DEVICE 101
#define FAKE_DEVICES 2

static int fake_initialised;
static int fake_active[FAKE_DEVICES];

int cuInit(unsigned flags)
{
    (void)flags;
    fake_initialised = 1;
    return FAKE_SUCCESS;
}

int cuDeviceGetCount(int *n)
{
    if (!fake_initialised) return FAKE_NOT_INITIALIZED;
    *n = FAKE_DEVICES;
    return FAKE_SUCCESS;
}

int cuDeviceGet(int *dev, int ordinal)
{
    if (!fake_initialised) return FAKE_NOT_INITIALIZED;
    if (ordinal < 0 || ordinal >= FAKE_DEVICES) return FAKE_INVALID_DEVICE;
    *dev = ordinal;
    return FAKE_SUCCESS;
}

int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    if (!fake_initialised) return FAKE_NOT_INITIALIZED;
    if (dev < 0 || dev >= FAKE_DEVICES) return FAKE_INVALID_DEVICE;
    fake_active[dev] = 1;
    *ctx = &fake_active[dev];
    return FAKE_SUCCESS;
}

int cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active)
{
    if (!fake_initialised) return FAKE_NOT_INITIALIZED;
    if (dev < 0 || dev >= FAKE_DEVICES) return FAKE_INVALID_DEVICE;
    *flags = 0;
    *active = fake_active[dev];
    return FAKE_SUCCESS;
}

int cuCtxGetCurrent(void **ctx)
{
    if (!fake_initialised) return FAKE_NOT_INITIALIZED;
    *ctx = NULL;
    return FAKE_SUCCESS;
}
