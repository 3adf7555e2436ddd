/*
 * options.h — every RANKSNAP_* environment option, declared once.
 *
 * options.c holds one table (name, type, default, one-line doc); parsing, defaults, validation and
 * `ranksnap --help-env` are all generated from it, so they cannot drift apart. A value that does
 * not parse is an error naming the variable and what was expected, never a silent default.
 */
#ifndef RANKSNAP_OPTIONS_H
#define RANKSNAP_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "alloc_conf.h"
#include "ranksnap.h"

typedef enum rs_backend_kind { RS_BACKEND_AUTO = 0, RS_BACKEND_CUDA, RS_BACKEND_SIM } rs_backend_kind;
/* PYTHON and ALL are PyTorch's stacks (RANKSNAP_RECORDER=torch): its own Python frames, or those
 * and the native ones. */
typedef enum rs_stacks_mode {
    RS_STACKS_NATIVE = 0,
    RS_STACKS_FP,
    RS_STACKS_NONE,
    RS_STACKS_PYTHON,
    RS_STACKS_ALL
} rs_stacks_mode;
typedef enum rs_gather_mode { RS_GATHER_AUTO = 0, RS_GATHER_ALL, RS_GATHER_FLAGGED } rs_gather_mode;
typedef enum rs_write_mode { RS_WRITE_ALL = 0, RS_WRITE_RANK0, RS_WRITE_NONE } rs_write_mode;
typedef enum rs_on_oom { RS_ON_OOM_DUMP = 0, RS_ON_OOM_DUMP_AND_ABORT, RS_ON_OOM_NONE } rs_on_oom;
typedef enum rs_ring_kind { RS_RING_MMAP = 0, RS_RING_MEMORY } rs_ring_kind;
/* Whose allocator and recorder: ranksnap's own, or PyTorch's driven by ranksnap (external.c). */
typedef enum rs_recorder_kind { RS_RECORDER_RANKSNAP = 0, RS_RECORDER_TORCH } rs_recorder_kind;

#define RS_MAX_RANK_LIMITS 64
#define RS_MAX_STACK_DEPTH 64
#define RS_PATH_MAX 4096
#define RS_JOB_MAX 256

/* RANKSNAP_MEMORY_LIMIT: "16GiB" (every rank), "2:8GiB,3:4GiB" (per rank), or both. */
typedef struct rs_rank_limit {
    int rank;
    uint64_t bytes;
} rs_rank_limit;

typedef struct rs_memory_limit {
    uint64_t default_bytes; /* 0 = no limit */
    int n_ranks;
    rs_rank_limit ranks[RS_MAX_RANK_LIMITS];
} rs_memory_limit;

typedef struct rs_options {
    int disable;                  /* RANKSNAP_DISABLE */
    rs_backend_kind backend;      /* RANKSNAP_BACKEND */
    rs_memory_limit memory_limit; /* RANKSNAP_MEMORY_LIMIT */
    rs_alloc_conf alloc_conf;     /* RANKSNAP_ALLOC_CONF (or PYTORCH_CUDA_ALLOC_CONF); holds
                                     RANKSNAP_MAX_SPLIT_SIZE too when that is set */
    uint64_t max_split_size;      /* RANKSNAP_MAX_SPLIT_SIZE (deprecated), UINT64_MAX = unset */
    uint64_t sim_capacity;        /* RANKSNAP_SIM_CAPACITY */
    uint64_t max_entries;         /* RANKSNAP_MAX_ENTRIES */
    rs_stacks_mode stacks;        /* RANKSNAP_STACKS */
    int stack_depth;              /* RANKSNAP_STACK_DEPTH */
    int record;                   /* RANKSNAP_RECORD: record from init on */
    int debug_level;              /* RANKSNAP_DEBUG: 0 none, 1 warn, 2 info, 3 trace */
    unsigned debug_subsys;        /* RANKSNAP_DEBUG_SUBSYS: bit mask of rs_log_subsys */
    char dir[RS_PATH_MAX];        /* RANKSNAP_DIR */
    char job[RS_JOB_MAX];         /* RANKSNAP_JOB: "" = take the batch system's job id */
    char steps[512];              /* RANKSNAP_STEPS, parsed by schedule.c ("" = whole run) */
    char step_on[128];            /* RANKSNAP_STEP_ON: "MPI_Allreduce:N", "" = app's ranksnap_step */
    int trigger_steps;            /* RANKSNAP_TRIGGER_STEPS: length of a triggered range */
    int trigger_lag;              /* RANKSNAP_TRIGGER_LAG: steps between a trigger and its start */
    rs_gather_mode gather;        /* RANKSNAP_GATHER */
    int gather_timeout;           /* RANKSNAP_GATHER_TIMEOUT, seconds */
    rs_write_mode write;          /* RANKSNAP_WRITE */
    double divergence;            /* RANKSNAP_DIVERGENCE, percent */
    char groups[256];             /* RANKSNAP_GROUPS: "pp=4,dp=8", "" = ranks not grouped */
    char site_skip[1024];         /* RANKSNAP_SITE_SKIP: patterns of frames never a site */
    int report;                   /* RANKSNAP_REPORT: rank 0 prints the text report */
    rs_on_oom on_oom;             /* RANKSNAP_ON_OOM */
    int signals;                  /* RANKSNAP_SIGNALS: dump on fatal signals */
    int dump_timeout_ms;          /* RANKSNAP_DUMP_TIMEOUT_MS */
    rs_ring_kind ring;            /* RANKSNAP_RING */
    int mpi;                      /* RANKSNAP_MPI: join the launcher's MPI world */
    char mpi_plugin[RS_PATH_MAX]; /* RANKSNAP_MPI_PLUGIN: auto, openmpi, mpich, none or a path */
    int driver;                   /* RANKSNAP_DRIVER: record the CUDA driver's allocations */
    char nvml[512];               /* RANKSNAP_NVML: the library that says what this process
                                     uses of a device, "none" = not asked */
    rs_recorder_kind recorder;    /* RANKSNAP_RECORDER */
} rs_options;

/* Where values come from; getenv in production, a table in tests. */
typedef const char *(*rs_getenv_fn)(const char *name, void *ctx);

void rs_options_defaults(rs_options *o);

/* Fills `o` with the defaults, then parses every option found through `get` (an empty value is
 * the same as an unset one). On the first bad value returns RANKSNAP_ERR_OPTION
 * and sets the thread's last error to e.g. "RANKSNAP_MEMORY_LIMIT=lots: expected a size such as
 * 16GiB, 512MiB or 1073741824, or rank:size pairs such as 2:8GiB,3:4GiB". */
ranksnap_status rs_options_load(rs_options *o, rs_getenv_fn get, void *ctx);
ranksnap_status rs_options_load_env(rs_options *o);
/* The defaults, then only the option `name`: from `value` when it is not NULL (a command-line
 * flag), else from the environment. For the command, which needs one setting and must not stop
 * on a bad value of an unrelated RANKSNAP_* variable. */
ranksnap_status rs_options_load_one(rs_options *o, const char *name, const char *value);

/* "16GiB", "1.5GB", "512KiB", "20MiB", "4096", "4096B". Suffixes are case-insensitive: K/M/G/T
 * (and KiB...) are powers of 1024, KB/MB/GB/TB powers of 1000. A fraction ("1.5GiB") is rounded
 * down to a whole byte; blanks around the number and before the suffix are allowed. Returns 0 on
 * success, -1 if the string is not a size or overflows 64 bits. */
int rs_options_parse_size(const char *s, uint64_t *out);

/* Cap of reserved bytes for `rank` (0 = none). */
uint64_t rs_options_memory_limit_for_rank(const rs_memory_limit *m, int rank);

/* 1 if `name` is a RANKSNAP_* option of the table. */
int rs_options_is_known(const char *name);

/* The option name closest to `name` (case-insensitive edit distance of at most 2), or NULL:
 * the "did you mean" of the warning about unknown RANKSNAP_* variables. */
const char *rs_options_closest(const char *name);

/* `ranksnap --help-env`: one block per option, from the table. */
void rs_options_print_help(FILE *out);


#endif
