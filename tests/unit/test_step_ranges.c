/*
 * test_step_ranges — a snapshot is readable whatever order the steps came in: steps found from the
 * collectives that open a range, then the program's own ranksnap_step(0); the program's steps
 * going back; ranksnap_record switched on and off across them; a trigger's start. Each order runs
 * in a child (a fresh ranksnap), dumps, and the parent decodes the snapshot and checks its ranges.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ranksnap.h"
#include "rsnap_decode.h"
#include "snapshot.h"
#include "steps.h"

/* `it` iterations of two all-reduces: steps found from them (RS_SD_MIN_SPAN calls to lock) */
static void collectives(int it)
{
    for (int i = 0; i < it; i++) {
        rs_steps_collective_done("MPI_Allreduce", 4, 1, 2);
        rs_steps_collective_done("MPI_Allreduce", 1, 1, 2);
    }
}

static void detected_then_app_step_0(void)
{
    collectives(68); /* the range 66:70 opens at step 66 */
    ranksnap_step(0);
    ranksnap_step(1);
}

static void detected_then_app_steps_inside_the_range(void)
{
    collectives(68);
    for (int s = 67; s < 72; s++) ranksnap_step(s);
}

static void app_steps_going_back(void)
{
    for (int s = 64; s < 68; s++) ranksnap_step(s);
    ranksnap_step(3);
    ranksnap_step(66);
    ranksnap_step(2);
}

static void record_on_off_across_steps_going_back(void)
{
    ranksnap_step(90);
    ranksnap_record(1);
    ranksnap_step(91);
    ranksnap_step(5);
    ranksnap_record(0);
    ranksnap_record(1);
    ranksnap_step(1);
    ranksnap_record(0);
    collectives(3);
}

static void trigger_start_then_steps_going_back(void)
{
    ranksnap_step(10);
    ranksnap_step(11);
    ranksnap_step(0);
    ranksnap_step(12);
    ranksnap_step(1);
}

typedef struct order {
    const char *name;
    const char *steps;   /* RANKSNAP_STEPS */
    int trigger;         /* a trigger file asks for a range */
    void (*run)(void);
    int min_ranges;      /* ranges the snapshot must hold at least */
} order;

static const order ORDERS[] = {
    {"detected range open, then the program's step 0", "66:70", 0, detected_then_app_step_0, 1},
    {"detected range open, then the program's steps in it", "66:70", 0, detected_then_app_steps_inside_the_range, 1},
    {"the program's steps going back", "66:70", 0, app_steps_going_back, 1},
    {"ranksnap_record on and off while the steps go back", "1000:1001", 0, record_on_off_across_steps_going_back, 2},
    {"a trigger's start, then steps going back", "1000:1001", 1, trigger_start_then_steps_going_back, 1},
};

/* One order in a child: its snapshot at `path`. The exit status is 0 when every call worked. */
static int child(const order *o, const char *dir, const char *path)
{
    setenv("RANKSNAP_DIR", dir, 1);
    setenv("RANKSNAP_STEPS", o->steps, 1);
    setenv("RANKSNAP_REPORT", "0", 1);
    setenv("RANKSNAP_STACKS", "none", 1);
    setenv("RANKSNAP_SIGNALS", "0", 1);
    setenv("RANKSNAP_TRIGGER_STEPS", "3", 1);
    setenv("RANKSNAP_TRIGGER_LAG", "1", 1);
    unsetenv("RANKSNAP_STEP_ON");
    if (o->trigger) {
        char t[600];
        snprintf(t, sizeof t, "%s/trigger", dir);
        FILE *f = fopen(t, "w");
        if (!f) return 1;
        fclose(f);
    }
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 2;
    void *p = NULL;
    if (ranksnap_malloc(&p, 1 << 20, NULL) != RANKSNAP_OK) return 3;
    o->run();
    if (ranksnap_dump(path) != RANKSNAP_OK) return 4;
    if (ranksnap_free(p) != RANKSNAP_OK) return 5;
    return ranksnap_finalize() == RANKSNAP_OK ? 0 : 6;
}

TEST(every_order_of_steps_leaves_a_readable_snapshot)
{
    const char *base = getenv("RANKSNAP_DIR") ? getenv("RANKSNAP_DIR") : "/tmp";
    for (size_t k = 0; k < sizeof ORDERS / sizeof *ORDERS; k++) {
        const order *o = &ORDERS[k];
        char dir[512], path[600], cmd[1100];
        snprintf(dir, sizeof dir, "%s/order-%zu", base, k);
        snprintf(path, sizeof path, "%s/dumped.rsnap", dir);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
        CHECK(system(cmd) == 0);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) _exit(child(o, dir, path));
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        rs_snap *s = NULL;
        ranksnap_status st = rs_rsnap_decode_file(path, &s);
        if (st != RANKSNAP_OK) fprintf(stderr, "%s: %s\n", o->name, ranksnap_last_error());
        CHECK(st == RANKSNAP_OK);
        if (st != RANKSNAP_OK) continue;
        int bad = 0;
        for (size_t r = 0; r < s->time.n_ranges; r++) {
            fprintf(stderr, "%s: range [%lld, %lld]\n", o->name, (long long)s->time.ranges[r].begin,
                    (long long)s->time.ranges[r].end);
            bad |= s->time.ranges[r].end >= 0 && s->time.ranges[r].end < s->time.ranges[r].begin;
        }
        CHECK(!bad);
        CHECK(s->time.n_ranges >= (size_t)o->min_ranges);
        rs_snap_free(s);
    }
}

int main(void)
{
    RUN(every_order_of_steps_leaves_a_readable_snapshot);
    return check_summary();
}
