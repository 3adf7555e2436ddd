/*
 * endings.c — what a rank's file says of how its process ended, and why a rank has no data, in
 * the words of the reports.
 *
 * Every sentence rests on what the file recorded (format.h's rs_end, the steps it marked, the
 * settings it ran under) and says so; where the file recorded nothing, the sentence says that the
 * cause was not recorded and what would tell, never a guessed one.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>

#include "endings.h"
#include "errors.h"

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGABRT: return "SIGABRT";
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGKILL: return "SIGKILL";
    default: return NULL;
    }
}

/* snprintf into buf at *used, kept within n. */
static void put(char *buf, size_t n, size_t *used, const char *fmt, ...) RS_PRINTF(4, 5);
static void put(char *buf, size_t n, size_t *used, const char *fmt, ...)
{
    if (*used >= n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *used, n - *used, fmt, ap);
    va_end(ap);
    if (w > 0) *used += (size_t)w < n - *used ? (size_t)w : n - *used - 1;
}

size_t rs_endings_words(const rs_end *e, char *buf, size_t n)
{
    size_t used = 0;
    if (!n) return 0;
    buf[0] = '\0';
    int sig = (int)(e->flags & RS_END_SIGNAL_MASK);
    if (sig) {
        const char *name = signal_name(sig);
        put(buf, n, &used, "got signal %d%s%s%s", sig, name ? " (" : "", name ? name : "", name ? ")" : "");
    }
    if (e->flags & RS_END_MPI_ABORT)
        put(buf, n, &used, "%scalled MPI_Abort with error code %" PRId32, used ? ", then " : "",
            e->abort_code);
    if (e->flags & RS_END_EXIT) {
        put(buf, n, &used, "%sexited with status %" PRId32 "%s", used ? ", then " : "", e->status,
            (e->flags & RS_END_MPI_OPEN) ? " before MPI_Finalize" : "");
        if (e->flags & RS_END_OFF_MAIN)
            put(buf, n, &used, " (exit called on a thread other than the main one)");
    }
    return used;
}

size_t rs_endings_note(const rs_summary *s, int many, char *buf, size_t n)
{
    size_t used = 0;
    if (!n) return 0;
    buf[0] = '\0';
    char how[256];
    rs_endings_words(&s->end, how, sizeof how);
    const char *its = many ? "their" : "its", *sn = many ? "s" : "";
    uint32_t f = s->end.flags;
    if (s->recovered) {
        if (how[0]) {
            if (f & RS_END_DUMP_DONE)
                put(buf, n, &used, "%s; the snapshot%s %s wrote then %s not among the files read",
                    how, sn, many ? "they" : "it", many ? "are" : "is");
            else
                put(buf, n, &used, "%s without writing %s snapshot%s (%s)", how, its, sn,
                    (f & RS_END_DUMP_GAVE_UP) ? "the dump gave up: a thread held the allocator's lock"
                    : (f & RS_END_DUMP_BEGAN) ? "the dump was begun and did not finish before the process ended"
                    : (f & RS_END_SIGNAL_MASK) ? "the process ended before the dump began"
                                               : "with no recorded range left to write");
        } else {
            put(buf, n, &used, "ended without writing %s snapshot%s, and without an exit, a fatal "
                "signal or an MPI_Abort that ranksnap saw: the cause was not recorded (SIGKILL, from "
                "the kernel's OOM killer or from mpirun once another rank ended, _exit and exec "
                "leave no trace in the process; mpirun's message or the kernel's log says which)",
                its, sn);
        }
        if (s->events)
            put(buf, n, &used, "; %s state is rebuilt from the events in %s ring%s", its, its, sn);
        else
            put(buf, n, &used, "; %s ring%s held no events: %s numbers are what %s header%s kept "
                "(the allocator's totals at the last step, the segments)", its, sn, its,
                many ? "their" : "its", sn);
    } else if (how[0] && (f & RS_END_AFTER_SNAPSHOT)) {
        put(buf, n, &used, "%s after %s snapshot%s %s written (which %s ring%s recorded)", how, its, sn,
            many ? "were" : "was", its, sn);
    } else if (how[0] && (f & RS_END_SIGNAL_MASK)) {
        put(buf, n, &used, "%s: %s snapshot%s %s written on that signal by ranksnap's dumper thread",
            how, its, sn, many ? "were" : "was");
        if (!s->complete) put(buf, n, &used, ", so %s state may be mid-update", its);
    } else if (how[0]) {
        put(buf, n, &used, "%s; %s snapshot%s %s written as it left", how, its, sn,
            many ? "were" : "was");
    } else if (!s->complete) {
        put(buf, n, &used, "wrote %s snapshot%s from a crash path (a fatal signal; the file does not "
            "say which): %s state may be mid-update", its, sn, its);
    }
    return used;
}

size_t rs_endings_no_data_why(const rs_summary *s, char *buf, size_t n)
{
    size_t used = 0;
    if (!n) return 0;
    buf[0] = '\0';
    char how[256];
    rs_endings_words(&s->end, how, sizeof how);
    if (how[0])
        put(buf, n, &used, "it %s%s", how, s->recovered ? " without writing its snapshot" : "");
    else if (s->recovered)
        put(buf, n, &used, "it ended before recording anything, and how it ended was not recorded");
    if (s->n_steps > 0) {
        put(buf, n, &used, "%sit marked steps ", used ? "; " : "");
        if (s->step_stride == 1 && s->n_steps > 1)
            put(buf, n, &used, "%" PRId64 " to %" PRId64, s->step_first, s->step_first + s->n_steps - 1);
        else if (s->n_steps > 1)
            put(buf, n, &used, "from %" PRId64, s->step_first);
        else
            put(buf, n, &used, "%" PRId64, s->step_first);
        put(buf, n, &used, ", so it ran through its range");
    }
    if (s->driver == 0)
        put(buf, n, &used, "%sRANKSNAP_DRIVER=0 was set for this run: device memory the CUDA driver "
            "gave outside ranksnap's allocators (a statically linked CUDA runtime's, NCCL's, "
            "cuMemAlloc's) was not recorded; unset it to record that memory", used ? "; " : "");
    else if (!s->recovered && !how[0])
        put(buf, n, &used, "%snone of its allocation calls reached ranksnap, or it allocated no "
            "device memory (what ranksnap intercepts: docs/GPU.md, \"Interception\")",
            used ? "; " : "");
    return used;
}
