/*
 * shared_devices.c — the devices more than one process used (shared_devices.h): the ranks are
 * put together by their device's UUID, which is the same for every process on one GPU whatever
 * CUDA_VISIBLE_DEVICES made its index, and a device is kept when two ranks or more name it, or
 * when one of them saw NVML list other processes there. A rank whose file names no real device (a
 * simulated one, a PyTorch snapshot without ranksnap's key) is on none.
 */
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "shared_devices.h"

static int rs_uuid_known(const uint8_t u[16])
{
    for (int i = 0; i < 16; i++)
        if (u[i]) return 1;
    return 0;
}

ranksnap_status rs_shared_devices_find(const rs_summary *sums, size_t n, rs_shared_device **out,
                                       size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    rs_shared_device *v = calloc(n ? n : 1, sizeof *v);
    if (!v) return rs_error(RANKSNAP_ERR_HOST_MEMORY, "no memory for the devices of %zu ranks", n);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const rs_summary *s = &sums[i];
        if (!rs_uuid_known(s->device_uuid)) continue;
        size_t j = 0;
        while (j < k && memcmp(v[j].uuid, s->device_uuid, sizeof v[j].uuid) != 0) j++;
        if (j == k) memcpy(v[k++].uuid, s->device_uuid, sizeof v[j].uuid);
        rs_shared_device *d = &v[j];
        if (d->n_ranks < RS_SHARED_MAX_RANKS) d->ranks[d->n_ranks] = s->rank;
        d->n_ranks++;
        if (s->device_processes > d->processes) d->processes = s->device_processes;
    }
    size_t m = 0;
    for (size_t j = 0; j < k; j++)
        if (v[j].n_ranks > 1 || v[j].processes > 1) v[m++] = v[j];
    if (!m) {
        free(v);
        return RANKSNAP_OK;
    }
    *out = v;
    *n_out = m;
    return RANKSNAP_OK;
}
