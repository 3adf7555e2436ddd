/* postmortem.h — dumping on fatal signals through a dumper thread (see postmortem.c). */
#ifndef RANKSNAP_POSTMORTEM_H
#define RANKSNAP_POSTMORTEM_H

#include "ranksnap.h"

/* Runs on the dumper thread with the signal number. */
typedef void (*rs_pm_dump_fn)(int sig);

/* Starts the dumper thread and installs the handlers of SIGTERM, SIGINT, SIGABRT, SIGSEGV and
 * SIGBUS (not of a signal the program ignores). */
ranksnap_status rs_postmortem_start(rs_pm_dump_fn dump, int timeout_ms);
/* Puts back the handlers that were there (where ours is still installed) and stops the thread. */
void rs_postmortem_stop(void);
/* Asked by the handler before it wakes the dumper (NULL: always yes; set once the framework's
 * recorder is registered, external.c): 0 when the dump cannot run while this thread is stopped
 * in the handler (it holds Python's GIL), so that the handler hands the signal on at once. Must
 * be async-signal-safe. */
typedef int (*rs_pm_gate_fn)(void);
void rs_postmortem_set_gate(rs_pm_gate_fn gate);

/* The signal the dumper last handled, 0 if none. */
int rs_postmortem_last_signal(void);

#endif
