/*
 * world.c — world.h: joining, owning and leaving the launcher's MPI world.
 */
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"
#include "world.h"

#if defined(RANKSNAP_HAVE_MPI)
#include <mpi.h>

static int rs_we_own_mpi;
static int rs_in_wrapper_init;

void rs_world_wrapper_init(int inside)
{
    rs_in_wrapper_init = inside;
}

void rs_world_disown(void)
{
    rs_we_own_mpi = 0;
}

int rs_world_join(const void **comm_out)
{
    static MPI_Comm world;
    *comm_out = NULL;
    if (rs_in_wrapper_init) return 0;
    int inited = 0, finalized = 0;
    PMPI_Initialized(&inited);
    PMPI_Finalized(&finalized);
    if (finalized) return 0;
    if (!inited) {
        if (!rs_launcher_has_peers()) return 0;
        int provided = 0;
        if (PMPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return -1;
        rs_we_own_mpi = 1;
    }
    world = MPI_COMM_WORLD;
    *comm_out = &world;
    return 1;
}

void rs_world_abort(int code)
{
    int inited = 0, finalized = 0;
    PMPI_Initialized(&inited);
    PMPI_Finalized(&finalized);
    if (inited && !finalized) PMPI_Abort(MPI_COMM_WORLD, code);
    abort();
}

/* MPI_Initialized and MPI_Finalized may be called at any time, from any state of MPI. */
int rs_world_up(void)
{
    int inited = 0, finalized = 0;
    PMPI_Initialized(&inited);
    PMPI_Finalized(&finalized);
    return inited && !finalized;
}

int rs_world_left_open(void)
{
    return !rs_we_own_mpi && rs_world_up();
}

void rs_world_release(void)
{
    if (!rs_we_own_mpi) return;
    rs_we_own_mpi = 0;
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (!finalized) PMPI_Finalize();
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
 * works whenever it comes. */
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
    int inited = 0;
    PMPI_Initialized(&inited);
    return !inited;
}

#else /* !RANKSNAP_HAVE_MPI */

int rs_world_join(const void **comm_out)
{
    *comm_out = NULL;
    return 0;
}

int rs_world_program_will_init(void)
{
    return 0;
}

void rs_world_wrapper_init(int inside)
{
    (void)inside;
}

void rs_world_disown(void)
{
}

void rs_world_release(void)
{
}

int rs_world_up(void)
{
    return 0;
}

int rs_world_left_open(void)
{
    return 0;
}

void rs_world_abort(int code)
{
    (void)code;
    abort();
}

#endif
