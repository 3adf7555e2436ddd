/*
 * world.c — world.h: joining, owning and leaving the launcher's MPI world, through the MPI plugin.
 */
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"
#include "mpi_plugin.h"
#include "world.h"

int rs_world_join(const void **comm_out)
{
    *comm_out = NULL;
    /* a process with neither an MPI library nor an MPI launcher (torchrun, a program on its own)
     * looks for no plugin */
    int peers = rs_launcher_has_peers();
    if (!peers && !rs_mpi_plugin_process_has_mpi()) return 0;
    const rs_mpi_ops *m = rs_mpi_plugin();
    return m ? m->join(peers, comm_out) : 0;
}

void rs_world_abort(int code)
{
    const rs_mpi_ops *m = rs_mpi_plugin_peek();
    if (m) m->abort(code);
    abort();
}

void rs_world_release(void)
{
    const rs_mpi_ops *m = rs_mpi_plugin_peek();
    if (m) m->release();
}

/* 1 in *data when a loaded object other than ranksnap itself is linked with an MPI library (a
 * DT_NEEDED entry libmpi*): the program, or a library of it, calls MPI_Init. Python (mpi4py
 * initialises MPI only when it is not yet) and programs that use NCCL without MPI do not link
 * libmpi at start, and are joined to the job by rs_world_join. */
static int links_mpi_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    int *found = data;
    if (info->dlpi_name && strstr(info->dlpi_name, "libranksnap")) return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    uintptr_t strtab = 0;
    for (const ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB) strtab = (uintptr_t)d->d_un.d_ptr;
    /* the loader relocates the dynamic section's pointers in place on most targets; where it
     * does not (the vDSO, read-only dynamic sections) they are still offsets from the base */
    if (strtab && strtab < (uintptr_t)info->dlpi_addr) strtab += info->dlpi_addr;
    for (const ElfW(Dyn) *d = dyn; strtab && d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_NEEDED && !strncmp((const char *)strtab + d->d_un.d_val, "libmpi", 6))
            *found = 1;
    return *found; /* nonzero stops the walk */
}

/* Only under a launcher: a program started on its own gets no MPI from ranksnap, so its MPI_Init
 * works whenever it comes. Without a plugin for its MPI, ranksnap starts without MPI and leaves
 * the program's MPI_Init alone. */
int rs_world_program_will_init(void)
{
    if (!rs_launcher_has_peers()) return 0;
    static atomic_int links_mpi = -1; /* -1: not looked yet */
    int l = atomic_load_explicit(&links_mpi, memory_order_relaxed);
    if (l < 0) {
        int found = 0;
        dl_iterate_phdr(links_mpi_cb, &found);
        atomic_store_explicit(&links_mpi, found, memory_order_relaxed);
        l = found;
    }
    if (!l) return 0;
    const rs_mpi_ops *m = rs_mpi_plugin();
    return m && !(m->state() & RS_MPI_INITIALIZED);
}
