/*
 * postmortem.c — a snapshot on disk when the process is about to die from a signal.
 *
 * A signal handler may only do async-signal-safe work, and writing a snapshot (malloc, msgpack,
 * fsync) is not. So a dumper thread is started at init and sleeps in read() on a pipe; the
 * handler writes the signal number into that pipe and waits for the dumper's answer on a second
 * pipe with poll(), at most RANKSNAP_DUMP_TIMEOUT_MS. Then it hands the signal on: to the handler
 * the program had installed before us, or — after putting the old disposition back — raise()s it,
 * so that the exit status and the core dump are what they would have been without ranksnap. For
 * SIGSEGV/SIGBUS the re-raised signal stays blocked until the handler returns; the faulting
 * instruction then runs again and the default action takes the process down as before.
 *
 * Only the first fatal signal dumps; a second one (or a fault inside the dumper) goes straight to
 * the old disposition. The dumper blocks every signal so that the kernel never picks it to run a
 * handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "errors.h"
#include "log.h"
#include "postmortem.h"
#include "stacks.h"
#include "state.h"
#include "symbols.h"

static const int rs_pm_signals[] = {SIGTERM, SIGINT, SIGABRT, SIGSEGV, SIGBUS};
#define RS_PM_NSIG (sizeof rs_pm_signals / sizeof rs_pm_signals[0])

static struct sigaction rs_pm_old[RS_PM_NSIG];
static int rs_pm_installed[RS_PM_NSIG];
static int rs_pm_wake[2] = {-1, -1};
static int rs_pm_done[2] = {-1, -1};
static pthread_t rs_pm_thread;
static int rs_pm_running;
static int rs_pm_timeout_ms;
static rs_pm_dump_fn rs_pm_dump;
static atomic_int rs_pm_fired;
static _Atomic int rs_pm_last_signal;
static rs_pm_gate_fn _Atomic rs_pm_gate; /* ranksnap torch mode: may this thread wait for the dump? */

static int rs_pm_index(int sig)
{
    for (size_t i = 0; i < RS_PM_NSIG; i++)
        if (rs_pm_signals[i] == sig) return (int)i;
    return -1;
}

static void rs_pm_handler(int sig, siginfo_t *info, void *uc)
{
    int saved = errno;
    int i = rs_pm_index(sig);
    /* noted here, at once (async-signal-safe): on a busy node mpirun's SIGKILL may come before
     * the dumper thread runs, and the ring file still says what ended the rank */
    if (i >= 0) rs_state_note_end((uint32_t)sig & RS_END_SIGNAL_MASK, 0);
    rs_pm_gate_fn gate = atomic_load(&rs_pm_gate);
    if (i >= 0 && (!gate || gate()) && atomic_exchange(&rs_pm_fired, 1) == 0 && rs_pm_wake[1] >= 0 &&
        !pthread_equal(pthread_self(), rs_pm_thread)) {
        unsigned char b = (unsigned char)sig;
        if (write(rs_pm_wake[1], &b, 1) == 1) {
            struct pollfd p = {.fd = rs_pm_done[0], .events = POLLIN};
            int left = rs_pm_timeout_ms;
            while (poll(&p, 1, left) < 0 && errno == EINTR && left > 0) left /= 2;
        }
    }
    if (i < 0) {
        errno = saved;
        return;
    }
    const struct sigaction *old = &rs_pm_old[i];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, info, uc);
    } else if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL &&
               old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    } else {
        /* the disposition the program had, then the signal again: same exit, same core */
        sigaction(sig, old, NULL);
        raise(sig);
    }
    errno = saved;
}

static void *rs_pm_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    rs_symbols_prewarm();
    for (;;) {
        unsigned char b = 0;
        ssize_t n = read(rs_pm_wake[0], &b, 1);
        if (n < 0 && errno == EINTR) continue;
        if (n != 1 || b == 0) break; /* closed or told to stop */
        atomic_store(&rs_pm_last_signal, (int)b);
        if (rs_pm_dump) rs_pm_dump((int)b);
        unsigned char d = 1;
        while (write(rs_pm_done[1], &d, 1) < 0 && errno == EINTR) {
        }
    }
    return NULL;
}

static void rs_pm_close_pipes(void)
{
    for (int k = 0; k < 2; k++) {
        if (rs_pm_wake[k] >= 0) close(rs_pm_wake[k]);
        if (rs_pm_done[k] >= 0) close(rs_pm_done[k]);
        rs_pm_wake[k] = rs_pm_done[k] = -1;
    }
}

/* A child forked after start (a DataLoader worker) has the handlers but not the dumper thread,
 * and shares its pipe with the parent's: its signals must not wake the parent's dumper. */
static void rs_pm_atfork_child(void)
{
    atomic_store(&rs_pm_fired, 1);
}

static void rs_pm_register_atfork(void)
{
    pthread_atfork(NULL, NULL, rs_pm_atfork_child);
}

void rs_postmortem_set_gate(rs_pm_gate_fn gate)
{
    atomic_store(&rs_pm_gate, gate);
}

ranksnap_status rs_postmortem_start(rs_pm_dump_fn dump, int timeout_ms)
{
    static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
    if (rs_pm_running) return RANKSNAP_OK;
    if (pipe2(rs_pm_wake, O_CLOEXEC) != 0 || pipe2(rs_pm_done, O_CLOEXEC) != 0) {
        int e = errno;
        rs_pm_close_pipes();
        return rs_error(RANKSNAP_ERR_IO, "RANKSNAP_SIGNALS: cannot create the dumper's pipes: %s", strerror(e));
    }
    rs_pm_dump = dump;
    rs_pm_timeout_ms = timeout_ms;
    atomic_store(&rs_pm_fired, 0);
    if (pthread_create(&rs_pm_thread, NULL, rs_pm_main, NULL) != 0) {
        rs_pm_close_pipes();
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "RANKSNAP_SIGNALS: cannot start the dumper thread");
    }
    rs_pm_running = 1;
    pthread_once(&atfork_once, rs_pm_register_atfork);
    for (size_t i = 0; i < RS_PM_NSIG; i++) {
        struct sigaction old;
        if (sigaction(rs_pm_signals[i], NULL, &old) != 0) continue;
        /* a signal the program ignores stays ignored: it will not kill the process */
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = rs_pm_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(rs_pm_signals[i], &sa, &rs_pm_old[i]) == 0) rs_pm_installed[i] = 1;
    }
    return RANKSNAP_OK;
}

void rs_postmortem_stop(void)
{
    if (!rs_pm_running) return;
    for (size_t i = 0; i < RS_PM_NSIG; i++) {
        if (!rs_pm_installed[i]) continue;
        /* put the old disposition back only if ours is still the one installed */
        struct sigaction cur;
        if (sigaction(rs_pm_signals[i], NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
            cur.sa_sigaction == rs_pm_handler)
            sigaction(rs_pm_signals[i], &rs_pm_old[i], NULL);
        rs_pm_installed[i] = 0;
    }
    unsigned char stop = 0;
    while (write(rs_pm_wake[1], &stop, 1) < 0 && errno == EINTR) {
    }
    pthread_join(rs_pm_thread, NULL);
    rs_pm_running = 0;
    rs_pm_close_pipes();
}

int rs_postmortem_last_signal(void)
{
    return atomic_load(&rs_pm_last_signal);
}
