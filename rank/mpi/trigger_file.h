/*
 * trigger_file.h — triggers in a job whose ranks share no MPI (torchrun): rank 0 publishes the
 * start step it chose in RANKSNAP_DIR/trigger.start, and every other rank looks for it at its
 * step boundaries, as it would test a posted MPI receive. RANKSNAP_DIR must be one all ranks see.
 */
#ifndef RANKSNAP_TRIGGER_FILE_H
#define RANKSNAP_TRIGGER_FILE_H

#include <stdint.h>

/* Rank 0: writes "START ATTEMPT JOB" atomically; a failure is a warning (the others then miss
 * this trigger, rank 0 records alone). */
void rs_trigger_file_publish(const char *dir, int64_t start);

/* The other ranks: 1 and *start when the file holds a start of this job and attempt later than
 * *seen (which it then updates), 0 otherwise. One stat() when nothing changed. */
int rs_trigger_file_poll(const char *dir, int64_t *seen, int64_t *start);

#endif
