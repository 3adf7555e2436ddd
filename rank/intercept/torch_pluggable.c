/*
 * torch_pluggable.c — the entry points of PyTorch's pluggable allocator (include/ranksnap.h).
 *
 * torch.cuda.memory.CUDAPluggableAllocator dlopens libranksnap.so and calls these two functions
 * for every tensor allocation and free, instead of its own caching allocator. PyTorch then only
 * forwards requests: the caching, the history and the snapshots are ranksnap's, so that a PyTorch
 * job is compared across ranks by the same code as a C/CUDA one.
 *
 * The first malloc starts ranksnap (rs_instance_ensure_wait: it may wait for an init in progress,
 * since PyTorch never calls in from inside ranksnap's own init, and joins MPI under mpirun).
 * PyTorch does not check the pointer alloc_fn returns, so a failure cannot be reported as a
 * status: it is printed, with the OOM message PyTorch's own allocator would have raised, and NULL
 * is returned. No CUDA headers are needed: the stream is the void * of the public API, so these
 * entry points exist in every build (in one without CUDA they serve the sim device, for tests).
 */
#include <stdio.h>

#include "errors.h"
#include "instance.h"
#include "alloc_api.h"
#include "passthrough.h"
#include "ranksnap.h"
#include "state.h"

void *ranksnap_torch_malloc(size_t size, int device, void *stream)
{
    rs_state_note_intercepted();
    /* PyTorch asks for 0 bytes for empty tensors; its own allocator answers NULL too */
    if (size == 0) return NULL;
    ranksnap_status st = rs_instance_ensure_wait();
    void *p = NULL;
    if (st == RANKSNAP_OK) {
        /* PyTorch names the device; each has its own allocator */
        st = rs_alloc_api_malloc_on(device, &p, size, stream, __builtin_return_address(0));
    } else if (rs_passthrough_on()) {
        /* RANKSNAP_DISABLE=1, or a start that failed: ranksnap_malloc passes straight through to
         * the device */
        st = ranksnap_malloc(&p, size, stream);
    }
    if (st != RANKSNAP_OK) {
        fprintf(stderr, "ranksnap_torch_malloc(%zu bytes): %s: %s\n", size, ranksnap_strerror(st),
                ranksnap_last_error());
        return NULL;
    }
    return p;
}

void ranksnap_torch_free(void *ptr, size_t size, int device, void *stream)
{
    (void)size;
    (void)device;
    (void)stream;
    if (!ptr) return;
    ranksnap_status st = ranksnap_free(ptr);
    /* after ranksnap_finalize (at exit, before Python's last tensors are gone) the block belongs
     * to the retired allocator */
    if (st == RANKSNAP_ERR_NOT_INITIALIZED && rs_instance_free_retired(ptr)) return;
    if (st != RANKSNAP_OK)
        fprintf(stderr, "ranksnap_torch_free(%p): %s: %s\n", ptr, ranksnap_strerror(st),
                ranksnap_last_error());
}
