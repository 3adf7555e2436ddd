/*
 * consumer_mpi.c — a user's MPI program that links ranksnap::mpi ahead of its MPI: its MPI_Init is
 * the plugin's, which starts ranksnap on MPI_COMM_WORLD (no ranksnap_init in the program), and
 * its MPI_Finalize ends ranksnap first.
 */
#include <mpi.h>
#include <stdio.h>

#include <ranksnap.h>

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 1;
    ranksnap_status st = ranksnap_step(0);
    printf("consumer: %s after MPI_Init, ranksnap %s\n", ranksnap_strerror(st), ranksnap_version());
    MPI_Finalize();
    return st == RANKSNAP_OK ? 0 : 1;
}
