/*
 * mpi_weak.h — every MPI symbol an MPI plugin uses, made a weak reference. Include after mpi.h.
 *
 * The plugin is linked with no MPI library: it binds to the process's. ranksnap-run preloads it
 * into an MPI program, and LD_PRELOAD goes on to whatever that program starts (a shell, a tool,
 * a Python without MPI): there, a strong reference to a symbol no library defines is a symbol
 * lookup error that ends the process at load (Open MPI's predefined objects are data, and
 * LD_BIND_NOW resolves functions at load too). Weak, they resolve to nothing there, and nothing
 * calls them: a process that has no MPI never calls MPI_Init. With the process's MPI, they bind
 * to it as strong ones would. (A child that opens an MPI only later finds the plugin unarmed,
 * plugin.c: its wrappers pass calls on, bound lazily — under LD_BIND_NOW they were bound to
 * nothing at load, and such a child needs RANKSNAP_MPI_PLUGIN=none.)
 */
#ifndef RANKSNAP_MPI_WEAK_H
#define RANKSNAP_MPI_WEAK_H

#pragma weak PMPI_Abort
#pragma weak PMPI_Allgather
#pragma weak PMPI_Allreduce
#pragma weak PMPI_Alltoall
#pragma weak PMPI_Barrier
#pragma weak PMPI_Bcast
#pragma weak PMPI_Cancel
#pragma weak PMPI_Cart_create
#pragma weak PMPI_Cart_sub
#pragma weak PMPI_Comm_create
#pragma weak PMPI_Comm_create_group
#pragma weak PMPI_Comm_disconnect
#pragma weak PMPI_Comm_dup
#pragma weak PMPI_Comm_free
#pragma weak PMPI_Comm_group
#pragma weak PMPI_Comm_rank
#pragma weak PMPI_Comm_size
#pragma weak PMPI_Comm_split
#pragma weak PMPI_Comm_split_type
#pragma weak PMPI_Error_string
#pragma weak PMPI_Finalize
#pragma weak PMPI_Finalized
#pragma weak PMPI_Get_library_version
#pragma weak PMPI_Group_free
#pragma weak PMPI_Group_translate_ranks
#pragma weak PMPI_Init
#pragma weak PMPI_Init_thread
#pragma weak PMPI_Initialized
#pragma weak PMPI_Irecv
#pragma weak PMPI_Isend
#pragma weak PMPI_Recv
#pragma weak PMPI_Reduce
#pragma weak PMPI_Reduce_scatter
#pragma weak PMPI_Send
#pragma weak PMPI_Test
#pragma weak PMPI_Testsome
#pragma weak PMPI_Wait

/* Open MPI's predefined handles are the addresses of these objects (MPICH's are constants) */
#if defined(OPEN_MPI)
#pragma weak ompi_mpi_byte
#pragma weak ompi_mpi_comm_null
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_request_null
#endif

#endif
