/*
 * endings.h — how a rank's process ended and why a rank has no data, in the reports' words, from
 * what its file recorded (endings.c).
 */
#ifndef RANKSNAP_ENDINGS_H
#define RANKSNAP_ENDINGS_H

#include <stddef.h>

#include "format.h"
#include "summary.h"

/* "got signal 15 (SIGTERM)", "called MPI_Abort with error code 3", "exited with status 1 before
 * MPI_Finalize", joined with ", then " in that order; "" when nothing was noted. Returns the
 * length written (cut to fit n). */
size_t rs_endings_words(const rs_end *e, char *buf, size_t n);

/* The comparison's note on how a rank ended, the words after "rank 3 " (`many`: after "ranks 1,
 * 3 ", in the plural): how it ended, which file it left and what that means for its numbers; ""
 * for a rank whose file was written at a range's end, an OOM or ranksnap_dump. */
size_t rs_endings_note(const rs_summary *s, int many, char *buf, size_t n);

/* Why a rank with no data has none, as far as its file says: how it ended, the steps it marked
 * (it ran through its range), RANKSNAP_DRIVER=0 (a setting, said as one). */
size_t rs_endings_no_data_why(const rs_summary *s, char *buf, size_t n);

#endif
