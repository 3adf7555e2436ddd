/*
 * test_mpi_plugin — finding the MPI plugin (rank/mpi/mpi_plugin.c) without an MPI job: the family
 * an MPI library's version string names; a process with no MPI and no MPI launcher looks for
 * nothing; a communicator given with no plugin for it leaves a world of one under the launcher's
 * rank; a torchrun worker under mpirun opens no MPI; a plugin that cannot be found, or one of the
 * other MPI family, is one line on rank 0, none elsewhere, and ranksnap runs on.
 * (The plugins themselves run in the MPI tests: tests/mpi, tests/cli/intercept_mpi_job.sh.)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "mpi_plugin.h"
#include "ranksnap.h"

static int family_is(const char *version, const char *family)
{
    const char *got = rs_mpi_plugin_family_of(version);
    if (got && family && !strcmp(got, family)) return 1;
    if (!got && !family) return 1;
    printf("  \"%s\": %s, expected %s\n", version ? version : "(null)", got ? got : "none",
           family ? family : "none");
    return 0;
}

TEST(mpi_family_from_the_library_version)
{
    CHECK(family_is("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4", "openmpi"));
    CHECK(family_is("IBM Spectrum MPI 10.04.00.03", "openmpi"));
    CHECK(family_is("MPICH Version:      4.0.2", "mpich"));
    CHECK(family_is("Intel(R) MPI Library 2021.10 for Linux* OS", "mpich"));
    CHECK(family_is("MVAPICH2 Version      :\t2.3.7", "mpich"));
    CHECK(family_is("MPI VERSION    : CRAY MPICH version 8.1.27", "mpich"));
    CHECK(family_is("Microsoft MPI 10.1", NULL));
    CHECK(family_is("", NULL));
    CHECK(family_is(NULL, NULL));
}

static const char *const launcher_vars[] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMIX_SIZE", "PMI_RANK", "PMI_SIZE",
    "SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID",
    "RANKSNAP_MPI_PLUGIN", "RANKSNAP_STEPS", "RANKSNAP_RECORDER", NULL};

/* fn() in a fresh process (one runtime and one plugin lookup per process), its stderr into
 * `err`; the child's exit status. */
static int in_child(int (*fn)(void), const char *tag, char *err, size_t n)
{
    char dir[256], log[300];
    snprintf(dir, sizeof dir, "/tmp/rs-mpi-plugin-%s-%d", tag, (int)getpid());
    snprintf(log, sizeof log, "%s.stderr", dir);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        for (const char *const *v = launcher_vars; *v; v++) unsetenv(*v);
        setenv("RANKSNAP_DIR", dir, 1);
        setenv("RANKSNAP_BACKEND", "sim", 1);
        setenv("RANKSNAP_REPORT", "0", 1);
        setenv("RANKSNAP_RING", "memory", 1);
        if (!freopen(log, "w", stderr)) _exit(99);
        int rc = fn();
        fflush(NULL);
        _exit(rc);
    }
    int status = 0;
    int ok = pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status);
    err[0] = '\0';
    FILE *f = fopen(log, "r");
    if (f) {
        size_t got = fread(err, 1, n - 1, f);
        err[got] = '\0';
        fclose(f);
    }
    if (err[0]) printf("  %s: stderr: %s", tag, err);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, log);
    CHECK(system(cmd) == 0);
    return ok ? WEXITSTATUS(status) : -1;
}

static int lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* Open MPI's mpirun's variables for rank `rank` of 2. */
static void under_mpirun(const char *rank)
{
    setenv("OMPI_COMM_WORLD_RANK", rank, 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
}

/* ranksnap starts, and neither a plugin nor an MPI library is in the process. */
static int on_its_own(void)
{
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 1;
    if (rs_mpi_plugin_peek() != NULL) return 2;
    if (rs_mpi_plugin_process_has_mpi()) return 3;
    ranksnap_finalize();
    return 0;
}

TEST(process_without_mpi_or_mpi_launcher_looks_for_no_plugin)
{
    char err[4096];
    CHECK_EQ_U64(in_child(on_its_own, "alone", err, sizeof err), 0);
    CHECK(err[0] == '\0');
}

/* torchrun started under mpirun or srun: the agent's MPI variables are inherited, but its workers
 * are no MPI ranks (rank/mpi/launcher.h), and nothing of MPI is opened for them. */
static int torchrun_worker_under_mpirun(void)
{
    under_mpirun("0");
    setenv("TORCHELASTIC_RUN_ID", "job", 1);
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "4", 1);
    return on_its_own();
}

TEST(torchrun_worker_under_mpirun_opens_no_mpi)
{
    char err[4096];
    CHECK_EQ_U64(in_child(torchrun_worker_under_mpirun, "torchrun", err, sizeof err), 0);
    CHECK(err[0] == '\0');
}

/* An MPI_Comm's address, as a program passes it; never read without a plugin. */
static int comm_without_plugin(void)
{
    under_mpirun("1");
    setenv("RANKSNAP_MPI_PLUGIN", "none", 1);
    long comm = 0;
    if (ranksnap_init(&comm) != RANKSNAP_OK) return 1;
    if (ranksnap_dump(NULL) != RANKSNAP_OK) return 2;
    char path[512];
    snprintf(path, sizeof path, "%s/rank-00001.rsnap", getenv("RANKSNAP_DIR"));
    if (access(path, F_OK) != 0) return 3; /* the launcher's rank, not rank 0 of a world of one */
    ranksnap_finalize();
    return 0;
}

TEST(communicator_without_a_plugin_is_a_world_of_one_under_the_launchers_rank)
{
    char err[4096];
    CHECK_EQ_U64(in_child(comm_without_plugin, "comm", err, sizeof err), 0);
}

/* Under Open MPI's mpirun (its variables), with a plugin that is not there: whether libmpi.so.40
 * opens or not, one line on rank 0, and ranksnap starts without MPI. */
static int missing_plugin(const char *rank)
{
    under_mpirun(rank);
    setenv("RANKSNAP_MPI_PLUGIN", "/nonexistent/libranksnap-mpi-openmpi.so", 1);
    if (ranksnap_init(NULL) != RANKSNAP_OK) return 1;
    if (rs_mpi_plugin_peek() != NULL) return 2;
    if (ranksnap_dump(NULL) != RANKSNAP_OK) return 3;
    ranksnap_finalize();
    return 0;
}

static int missing_plugin_rank0(void)
{
    return missing_plugin("0");
}

static int missing_plugin_rank1(void)
{
    return missing_plugin("1");
}

TEST(missing_plugin_is_one_line_on_rank_0_and_ranksnap_runs_on)
{
    char err[4096];
    CHECK_EQ_U64(in_child(missing_plugin_rank0, "missing0", err, sizeof err), 0);
    CHECK_EQ_U64(lines_with(err, "ranksnap: "), 1);
    CHECK_EQ_U64(lines_with(err, "going on without MPI"), 1);
    CHECK_EQ_U64(in_child(missing_plugin_rank1, "missing1", err, sizeof err), 0);
    CHECK(err[0] == '\0');
}

/* Open MPI loaded, and the plugin of MPICH's ABI named: refused (it would pass an int where Open
 * MPI takes a pointer), said, and the communicator left for a world of one. 77: no Open MPI
 * here, or no MPICH plugin built, to try it with. */
static int other_family(void)
{
#if defined(RS_TEST_MPICH_PLUGIN)
    if (!dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL)) return 77;
    under_mpirun("0");
    setenv("RANKSNAP_MPI_PLUGIN", RS_TEST_MPICH_PLUGIN, 1);
    long comm = 0;
    if (ranksnap_init(&comm) != RANKSNAP_OK) return 1;
    if (rs_mpi_plugin_peek() != NULL) return 2;
    ranksnap_finalize();
    return 0;
#else
    return 77;
#endif
}

TEST(plugin_of_the_other_mpi_family_is_refused_in_one_line)
{
    char err[4096];
    int st = in_child(other_family, "other", err, sizeof err);
    if (st == 77) {
        printf("  not tried: no Open MPI to load, or no plugin of MPICH's ABI built\n");
        return;
    }
    CHECK_EQ_U64(st, 0);
    CHECK_STR_CONTAINS(err, "is built for MPICH, and this process's MPI is Open MPI");
    CHECK_EQ_U64(lines_with(err, "ranksnap: "), 1);
}

int main(void)
{
    RUN(mpi_family_from_the_library_version);
    RUN(process_without_mpi_or_mpi_launcher_looks_for_no_plugin);
    RUN(torchrun_worker_under_mpirun_opens_no_mpi);
    RUN(communicator_without_a_plugin_is_a_world_of_one_under_the_launchers_rank);
    RUN(missing_plugin_is_one_line_on_rank_0_and_ranksnap_runs_on);
    RUN(plugin_of_the_other_mpi_family_is_refused_in_one_line);
    return check_summary();
}
