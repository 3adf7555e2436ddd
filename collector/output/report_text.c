/*
 * report_text.c — the comparison told to a person at a terminal: a table with one row per rank,
 * then the verdicts in plain sentences (the OOMs first, then the divergent ranks, the missing
 * ones, the notes).
 *
 * Sizes go through rs_text_format_bytes so that they read as PyTorch's messages do; a site is
 * its path (sites.h): "function (file:line)" for each of its frames, joined by arrows, with the
 * file's base name (its path inside an installed package), the full path being in report.json.
 * Every string that came from a file (host, function and file names, holders, notes) is written
 * through rs_text_put / rs_text_escape (common/text.h), so that a snapshot cannot drive the terminal.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "endings.h"
#include "errors.h"
#include "options.h"
#include "report_text.h"
#include "sat.h"
#include "text.h"

/* How many sites a verdict sentence names; the rest are counted (report.json has them all). */
#define SITES_INLINE 3

void rs_report_text_site(FILE *out, const rs_compare_site *s)
{
    char buf[RS_SITE_PATH_MAX * (RS_SITE_FUNC_LEN + RS_SITE_FILE_LEN + 16)];
    rs_site_path_format(&s->path, buf, sizeof buf);
    rs_text_put(out, buf);
    rs_site_held_note(&s->site, buf, sizeof buf);
    fputs(buf, out);
}

void rs_report_text_bytes(FILE *out, uint64_t b)
{
    char buf[32];
    rs_text_format_bytes(b, buf, sizeof buf);
    fputs(buf, out);
}

void rs_report_text_signed_bytes(FILE *out, int64_t b)
{
    fputc(b < 0 ? '-' : '+', out);
    rs_report_text_bytes(out, b < 0 ? (uint64_t)0 - (uint64_t)b : (uint64_t)b);
}

void rs_report_text_pct(FILE *out, double pct)
{
    if (pct < 0) pct = -pct;
    fprintf(out, pct >= 10 ? "%.0f%%" : "%.1f%%", pct);
}

static int is_no_data(const rs_compare_result *r, int32_t rank)
{
    for (size_t i = 0; i < r->n_no_data; i++)
        if (r->no_data[i] == rank) return 1;
    return 0;
}

static const rs_compare_divergent *divergent_of(const rs_compare_result *r, int32_t rank)
{
    for (size_t i = 0; i < r->n_divergent; i++)
        if (r->divergent[i].rank == rank) return &r->divergent[i];
    return NULL;
}

static void print_table(FILE *out, const rs_compare_result *r)
{
    fprintf(out, "  %5s  %-16s  %14s  %14s  %14s  %12s  %9s  %s\n", "rank", "host",
            "peak allocated", "peak reserved", "fragmentation", "outside", "peak step", "OOM");
    for (size_t i = 0; i < r->n_ranks; i++) {
        const rs_summary *s = &r->ranks[i];
        const rs_compare_divergent *d = divergent_of(r, s->rank);
        char a[32], b[32], c[32], o[32], step[24], host[80];
        rs_text_format_bytes(s->peak_allocated, a, sizeof a);
        rs_text_format_bytes(s->peak_reserved, b, sizeof b);
        rs_text_format_bytes(rs_summary_fragmentation(s), c, sizeof c);
        /* a device's whole use is not the rank's: said under the table, not in its column */
        if (s->outside_of == RS_OUTSIDE_DEVICE)
            snprintf(o, sizeof o, "n/a");
        else
            rs_text_format_bytes(s->outside_peak, o, sizeof o);
        if (s->peak_step >= 0)
            snprintf(step, sizeof step, "%" PRId64, s->peak_step);
        else
            snprintf(step, sizeof step, "-");
        char line[256];
        int len = snprintf(line, sizeof line, "%c %5" PRId32 "  %-16.16s  %14s  %14s  %14s  %12s  %9s  %-3s",
                           d || s->oom ? '*' : ' ', s->rank,
                           rs_text_escape(host, sizeof host, s->host), a, b, c, o, step,
                           s->oom ? "yes" : "no");
        if (len < 0) len = 0;
        if ((size_t)len >= sizeof line) len = (int)sizeof line - 1;
        if (s->rank != r->reference_rank && !d)
            while (len > 0 && line[len - 1] == ' ') line[--len] = '\0';
        fputs(line, out);
        if (s->rank == r->reference_rank) fputs("  reference", out);
        if (is_no_data(r, s->rank)) fputs("  no data", out);
        if (d) {
            fprintf(out, "  %s", d->divergence_pct >= 0 ? "+" : "-");
            rs_report_text_pct(out, d->divergence_pct);
        }
        fputc('\n', out);
    }
}

/* "steps: detected: ncclAllReduce x1 per step (every rank)", or where the ranks numbered their
 * steps differently (pipeline stages see other collectives), each way with its ranks: a range
 * of steps then means other iterations on other ranks, which the reader must know. Nothing when
 * no file says. */
static void print_steps_from(FILE *out, const rs_compare_result *r)
{
    size_t first = r->n_ranks, ways = 0;
    for (size_t i = 0; i < r->n_ranks; i++) {
        if (!r->ranks[i].steps_from[0]) continue;
        if (first == r->n_ranks) first = i;
        size_t j = first;
        while (j < i && strcmp(r->ranks[j].steps_from, r->ranks[i].steps_from) != 0) j++;
        if (j == i) ways++;
    }
    if (!ways) return;
    int all = 1;
    for (size_t i = 0; i < r->n_ranks; i++) all &= r->ranks[i].steps_from[0] != '\0';
    if (ways == 1 && all) {
        fputs("steps: ", out);
        rs_text_put(out, r->ranks[first].steps_from);
        fputs(" (every rank)\n\n", out);
        return;
    }
    fputs("steps numbered differently across ranks:\n", out);
    for (size_t i = 0; i < r->n_ranks; i++) {
        const char *how = r->ranks[i].steps_from;
        size_t j = 0;
        while (j < i && strcmp(r->ranks[j].steps_from, how) != 0) j++;
        if (j < i) continue; /* this way was listed with its first rank */
        fputs("  rank", out);
        for (size_t k = i; k < r->n_ranks; k++)
            if (!strcmp(r->ranks[k].steps_from, how)) fprintf(out, " %" PRId32, r->ranks[k].rank);
        fputs(": ", out);
        rs_text_put(out, how[0] ? how : "not numbered");
        fputc('\n', out);
    }
    fputc('\n', out);
}

/* "recorded at the CUDA runtime: PyTorch's recorder does not support backend:cudaMallocAsync
 * (every rank)": how the ranks whose files say it were recorded, each way with its ranks, so that
 * a reader knows the history is not the framework's own. Nothing when no file says. */
static void print_recorded_by(FILE *out, const rs_compare_result *r)
{
    for (size_t i = 0; i < r->n_ranks; i++) {
        const char *by = r->ranks[i].recorded_by;
        if (!by[0]) continue;
        size_t j = 0, same = 0;
        while (j < i && strcmp(r->ranks[j].recorded_by, by) != 0) j++;
        if (j < i) continue; /* this way was listed with its first rank */
        for (size_t k = i; k < r->n_ranks; k++) same += !strcmp(r->ranks[k].recorded_by, by);
        rs_text_put(out, by);
        if (same == r->n_ranks) {
            fputs(" (every rank)\n\n", out);
            continue;
        }
        fputs(" (rank", out);
        for (size_t k = i; k < r->n_ranks; k++)
            if (!strcmp(r->ranks[k].recorded_by, by)) fprintf(out, " %" PRId32, r->ranks[k].rank);
        fputs(")\n\n", out);
    }
}

/* "rank 0 1: peak allocated is the cudaMallocAsync pool's live bytes, peak reserved the pool's
 * reserved bytes at that peak": where the columns of the ranks whose allocator was a
 * stream-ordered pool come from (rs_summary.async_pool), each way with its ranks. */
static void print_async_pool(FILE *out, const rs_compare_result *r)
{
    static const char *const reserved[] = {
        [RS_SUMMARY_ASYNC_POOL_RESERVED] = "the pool's reserved bytes at that peak",
        [RS_SUMMARY_ASYNC_AS_ALLOCATED] = "equal to it (the pool's reserved bytes were not read)"};
    int any = 0;
    for (int kind = RS_SUMMARY_ASYNC_POOL_RESERVED; kind <= RS_SUMMARY_ASYNC_AS_ALLOCATED; kind++) {
        int n = 0;
        for (size_t i = 0; i < r->n_ranks; i++) {
            if (r->ranks[i].async_pool != kind) continue;
            fprintf(out, "%s %" PRId32, n ? "" : "rank", r->ranks[i].rank);
            n++;
        }
        if (!n) continue;
        fprintf(out, ": peak allocated is the cudaMallocAsync pool's live bytes, peak reserved %s\n",
                reserved[kind]);
        any = 1;
    }
    if (any) fputc('\n', out);
}

/* "rank 1: NCCL holds 1.20 GiB, ncclMemAlloc holds 64.00 MiB (outside the allocator at the end:
 * 1.50 GiB, 240.00 MiB of it by no holder ranksnap saw: the CUDA context, ...)", for the ranks
 * whose outside memory has a known holder: the device's own count (total - free) set against the
 * holders, so that what no call shows is said as such. */
static void print_outside_holders(FILE *out, const rs_compare_result *r)
{
    int any = 0;
    for (size_t i = 0; i < r->n_ranks; i++) {
        const rs_summary *s = &r->ranks[i];
        if (s->n_outside_labels <= 0) continue;
        fprintf(out, "rank %" PRId32 ": ", s->rank);
        uint64_t held = 0;
        for (int k = 0; k < s->n_outside_labels && k < RS_SUMMARY_MAX_OUTSIDE_LABELS; k++) {
            fputs(k ? ", " : "", out);
            rs_text_put(out, rs_summary_outside_label_name(s->outside_labels[k].label));
            fputs(" holds ", out);
            rs_report_text_bytes(out, s->outside_labels[k].bytes);
            held += s->outside_labels[k].bytes;
        }
        int device = s->outside_of == RS_OUTSIDE_DEVICE;
        fputs(device ? " (its device's use beyond the allocator at the end, every process's: "
                     : " (outside the allocator at the end: ", out);
        rs_report_text_bytes(out, s->outside_end);
        if (s->outside_end > held) {
            fputs(", ", out);
            rs_report_text_bytes(out, s->outside_end - held);
            fputs(device ? " of it by no holder ranksnap saw: the CUDA context, what no call shows "
                           "and the other processes"
                         : " of it by no holder ranksnap saw: the CUDA context and what no call shows",
                  out);
        }
        fputs(")\n", out);
        any = 1;
    }
    if (any) fputc('\n', out);
}

/* "rank R: BYTES WHAT", the start of a line about one rank's memory. */
static void print_rank_bytes(FILE *out, int32_t rank, uint64_t bytes, const char *what)
{
    fprintf(out, "rank %" PRId32 ": ", rank);
    rs_report_text_bytes(out, bytes);
    fputs(what, out);
}

/* "rank 0: 1.21 GiB of its reserved bytes at the peak in private pools (the largest: CUDA graph
 * pool of main (infer.py:41)), 1.19 GiB of it in no block: ..." — what the table's fragmentation
 * leaves out (pools.h). */
static void print_pools(FILE *out, const rs_compare_result *r)
{
    int any = 0;
    for (size_t i = 0; i < r->n_ranks; i++) {
        const rs_summary *s = &r->ranks[i];
        if (!s->pools_at_peak) continue;
        print_rank_bytes(out, s->rank, s->pools_at_peak, " of its reserved bytes at the peak in private pools");
        if (r->pools && r->pools[i].function[0]) {
            char site[512];
            rs_site_format(&r->pools[i], site, sizeof site);
            fputs(" (the largest: ", out);
            rs_text_put(out, site);
            fputc(')', out);
        }
        fputs(", ", out);
        rs_report_text_bytes(out, s->pools_free_at_peak);
        fputs(" of it in no block: a CUDA graph keeps its pool for its replays, by design; not "
              "counted as fragmentation\n", out);
        any = 1;
    }
    if (r->by_held)
        fputs("ranks are compared by their peak allocated plus their private pools' free bytes at "
              "that peak: memory a rank cannot give back\n", out);
    if (any) fputc('\n', out);
}

/* Why a rank's own device memory was not known (rs_outside_why), and what the user can do. */
static const char *outside_why_sentence(int why)
{
    switch (why) {
    case RS_OUTSIDE_WHY_NVML_OFF: return "RANKSNAP_NVML=none";
    case RS_OUTSIDE_WHY_NVML_UNUSABLE:
        return "NVML could not be loaded or started where it ran: RANKSNAP_NVML names the library, "
               "and `ranksnap summary` of its file says what failed";
    case RS_OUTSIDE_WHY_DEVICE_UNKNOWN: return "NVML does not know its device";
    case RS_OUTSIDE_WHY_NOT_LISTED: return "NVML would not list its device's processes (no permission?)";
    case RS_OUTSIDE_WHY_PID_NOT_LISTED:
        return "its pid is not among the processes NVML lists on its device: a container with its "
               "own pid namespace? Run it with the host's (docker --pid=host, Kubernetes hostPID)";
    case RS_OUTSIDE_WHY_NO_FIGURE:
        return "NVML gives no figure for its process (MIG without the privilege to see it?)";
    default: return "`ranksnap summary` of its file says why";
    }
}

static const rs_summary *summary_of_rank(const rs_compare_result *r, int32_t rank)
{
    for (size_t i = 0; i < r->n_ranks; i++)
        if (r->ranks[i].rank == rank) return &r->ranks[i];
    return NULL;
}

/* "ranks 0 and 1", "ranks 0, 1 and 2", "rank 3"; `total` past the `shown` ones are counted. */
static void print_rank_list(FILE *out, const int32_t *ranks, size_t shown, size_t total)
{
    fputs(total == 1 ? "rank " : "ranks ", out);
    for (size_t i = 0; i < shown; i++)
        fprintf(out, "%s%" PRId32, !i ? "" : i + 1 == total ? " and " : ", ", ranks[i]);
    if (total > shown) fprintf(out, " and %zu more", total - shown);
}

/* The ranks whose own device memory was not known, and the devices several processes used:
 * "rank 1: its own device memory is not known (...); outside counts its device's whole use ...",
 * "GPU-… is shared by ranks 0 and 1 (NVML listed 2 there); the others held 7.52 GiB as rank 0
 * saw them, ...". */
static void print_device_use(FILE *out, const rs_compare_result *r)
{
    int any = 0;
    for (size_t i = 0; i < r->n_ranks; i++) {
        const rs_summary *s = &r->ranks[i];
        if (s->outside_of != RS_OUTSIDE_DEVICE) continue;
        fprintf(out, "rank %" PRId32 ": its own device memory is not known (", s->rank);
        fputs(outside_why_sentence(s->outside_why), out);
        fputs("); outside counts its device's whole use beyond its allocator, every process on it: ",
              out);
        rs_report_text_bytes(out, s->outside_peak);
        fputs(" at the peak\n", out);
        any = 1;
    }
    for (size_t k = 0; k < r->n_shared; k++) {
        const rs_shared_device *d = &r->shared[k];
        size_t shown = d->n_ranks < RS_SHARED_MAX_RANKS ? d->n_ranks : RS_SHARED_MAX_RANKS;
        char uuid[48];
        rs_text_uuid_format(d->uuid, uuid, sizeof uuid);
        fprintf(out, "%s is shared by ", uuid);
        print_rank_list(out, d->ranks, shown, d->n_ranks);
        if (d->processes > d->n_ranks)
            fprintf(out, " and %zu more process%s", (size_t)d->processes - d->n_ranks,
                    d->processes - d->n_ranks == 1 ? "" : "es");
        if (d->processes) fprintf(out, " (NVML listed %" PRIu32 " there)", d->processes);
        int own = 1, sep = 0;
        for (size_t j = 0; j < shown; j++) {
            const rs_summary *s = summary_of_rank(r, d->ranks[j]);
            if (!s) continue;
            own &= s->outside_of == RS_OUTSIDE_PROCESS;
            /* a rank NVML did not find among them cannot tell which of them are the others */
            if (!s->device_processes || s->outside_why == RS_OUTSIDE_WHY_PID_NOT_LISTED) continue;
            fputs(sep++ ? ", " : "; the others held ", out);
            rs_report_text_bytes(out, (uint64_t)s->device_others_kib * 1024);
            fprintf(out, " as rank %" PRId32 " saw them", s->rank);
            if (s->device_others_unknown)
                fprintf(out, " (%" PRIu16 " with no figure)", s->device_others_unknown);
        }
        fputs(own ? "; each rank's outside is its own process's\n" : "\n", out);
        for (size_t j = 0; j < shown; j++) {
            const rs_summary *s = summary_of_rank(r, d->ranks[j]);
            if (s && s->outside_of == RS_OUTSIDE_UNSAID)
                fprintf(out, "  rank %" PRId32 "'s file does not say whose memory its outside counts "
                             "(written before ranksnap measured each process's own): it may count "
                             "the whole device\n", s->rank);
        }
        any = 1;
    }
    if (any) fputc('\n', out);
}

/* "rank 0: 1.20 GiB taken outside the allocator at its peak, recorded as allocated: 1.00 GiB at
 * ncclCommInitRank (init.cc:12), ..." — memory the CUDA driver, ncclMemAlloc or a pool gave. */
static void print_recorded_outside(FILE *out, const rs_compare_result *r)
{
    int any = 0;
    for (size_t i = 0; i < r->n_ranks; i++) {
        const rs_summary *s = &r->ranks[i];
        if (!s->recorded_outside_peak) continue;
        print_rank_bytes(out, s->rank, s->recorded_outside_peak, " taken outside the allocator at its peak");
        for (int k = 0; k < s->n_outside_sites && k < RS_SUMMARY_MAX_OUTSIDE_SITES; k++) {
            char site[512];
            rs_site_format(&s->outside_sites[k], site, sizeof site);
            fputs(k ? ", " : ": ", out);
            rs_report_text_bytes(out, (uint64_t)s->outside_sites[k].bytes);
            if (s->outside_site_owners[k][0]) {
                fputs(" by ", out);
                rs_text_put(out, s->outside_site_owners[k]);
            }
            fputs(" at ", out);
            rs_text_put(out, site);
            rs_site_held_note(&s->outside_sites[k], site, sizeof site);
            fputs(site, out);
        }
        fputc('\n', out);
        any = 1;
    }
    if (any) fputc('\n', out);
}

static void print_sites_inline(FILE *out, const rs_compare_site *v, size_t n)
{
    for (size_t i = 0; i < n && i < SITES_INLINE; i++) {
        fputs(i ? ", " : ": ", out);
        rs_report_text_signed_bytes(out, v[i].site.bytes);
        fputs(" at ", out);
        rs_report_text_site(out, &v[i]);
    }
    if (n > SITES_INLINE) fprintf(out, ", and %zu more site%s", n - SITES_INLINE, n - SITES_INLINE == 1 ? "" : "s");
}

/* " (pp=2)": the role of a rank of a grouped comparison, nothing when not grouped. */
static void print_role(FILE *out, const rs_compare_result *r, int32_t role)
{
    if (role >= 0 && (size_t)role < r->n_roles) fprintf(out, " (%s)", r->roles[role].label);
}

static void print_oom(FILE *out, const rs_compare_result *r, const rs_compare_oom *v)
{
    fprintf(out, "rank %" PRId32, v->rank);
    print_role(out, r, v->role);
    fputs(" ran out of memory", out);
    if (v->step >= 0) fprintf(out, " at step %" PRId64, v->step);
    fputs(": tried to allocate ", out);
    /* a request is never of 0 bytes: 0 is a framework's error that did not say its size */
    if (v->requested)
        rs_report_text_bytes(out, v->requested);
    else
        fputs("(size not known)", out);
    /* an OOM the driver reported says nothing of the device: leave out what is not known */
    if (v->device_free || v->device_total) {
        fputs(" with ", out);
        rs_report_text_bytes(out, v->device_free);
        fputs(" free", out);
    }
    /* PyTorch's snapshots do not record the capacity: leave it out rather than print 0 */
    if (v->device_total) {
        fputs(" of ", out);
        rs_report_text_bytes(out, v->device_total);
    }
    fputs(" (allocated ", out);
    rs_report_text_bytes(out, v->allocated);
    fputs(", reserved ", out);
    rs_report_text_bytes(out, v->reserved);
    if (v->memory_limit) {
        fputs(", limit ", out);
        rs_report_text_bytes(out, v->memory_limit);
    }
    fputs(") at ", out);
    rs_report_text_site(out, &v->site);
    fputc('\n', out);
    if (v->n_live) fputs("  live at that moment:\n", out);
    for (size_t i = 0; i < v->n_live; i++) {
        char b[32];
        rs_text_format_bytes(v->live[i].site.bytes < 0 ? 0 : (uint64_t)v->live[i].site.bytes, b, sizeof b);
        fprintf(out, "    %12s  ", b);
        rs_report_text_site(out, &v->live[i]);
        fputc('\n', out);
    }
}

/* "+8.00 MiB per step since step 0 (a leak?)" */
static void print_growth_rate(FILE *out, const rs_compare_divergent *d)
{
    double rate = d->growth_per_step < 0 ? -d->growth_per_step : d->growth_per_step;
    fputs(d->divergence_pct >= 0 ? "+" : "-", out);
    rs_report_text_bytes(out, rate >= 1.8e19 ? UINT64_MAX : (uint64_t)(rate + 0.5));
    fprintf(out, " per step since step %" PRId64 " (a leak?)", d->first_divergent_step);
}

/* "rank 5 grows +8.00 MiB per step since step 0 (a leak?)" */
static void print_growth(FILE *out, const rs_compare_result *r, const rs_compare_divergent *d)
{
    fprintf(out, "rank %" PRId32, d->rank);
    print_role(out, r, d->role);
    fputs(" grows ", out);
    print_growth_rate(out, d);
}

static void print_exhaustion(FILE *out, const rs_compare_divergent *d)
{
    if (!d->growth || d->exhaust_step < 0 || !d->capacity) return;
    fputs("; at that rate it would fill its ", out);
    rs_report_text_bytes(out, d->capacity);
    fputs(d->capacity_is_limit ? " limit" : " device", out);
    if (d->exhaust_step <= d->last_step)
        fprintf(out, " at step %" PRId64, d->exhaust_step);
    else
        fprintf(out, " at step %" PRId64 " (%" PRId64 " steps after step %" PRId64 ")",
                d->exhaust_step, d->exhaust_step - d->last_step, d->last_step);
}

/* What the listed sites leave unexplained of the peak difference, when it is worth a word (1%):
 * a remainder in the direction of the divergence (sites beyond those listed, blocks the history
 * does not show). */
static void print_unattributed(FILE *out, const rs_compare_divergent *d)
{
    int64_t u = d->unattributed, total = d->delta;
    uint64_t au = u < 0 ? (uint64_t)0 - (uint64_t)u : (uint64_t)u;
    uint64_t at = total < 0 ? (uint64_t)0 - (uint64_t)total : (uint64_t)total;
    if (d->n_sites == 0 || au == 0 || au < at / 100 || (u < 0) != (total < 0)) return;
    fputs("; ", out);
    rs_report_text_signed_bytes(out, u);
    fputs(" not attributed to these sites", out);
}

/* "rank 1: +64.00 MiB in CUDA graph pools (152.00 MiB vs 88.00 MiB on rank 0, the reference),
 * allocated equal (16.00 MiB); it holds 62% more than the median (...)": a divergence its private
 * pools make, which its allocated bytes alone do not show (compare.h, by_pools). */
static void print_divergent_pools(FILE *out, const rs_compare_result *r, const rs_compare_divergent *d,
                                  const char *of, uint64_t median)
{
    int32_t ref = d->role >= 0 && (size_t)d->role < r->n_roles ? r->roles[d->role].reference_rank
                                                                : r->reference_rank;
    fprintf(out, "rank %" PRId32, d->rank);
    print_role(out, r, d->role);
    fputs(": ", out);
    rs_report_text_signed_bytes(out, rs_sat_sub_i64(rs_sat_i64(d->pools), rs_sat_i64(d->reference_pools)));
    fputs(d->pools_graph ? " in CUDA graph pools (" : " in private memory pools (", out);
    rs_report_text_bytes(out, d->pools);
    fputs(" vs ", out);
    rs_report_text_bytes(out, d->reference_pools);
    fprintf(out, " on rank %" PRId32 ", the reference), allocated ", ref);
    if (d->allocated == d->reference_allocated) {
        fputs("equal (", out);
        rs_report_text_bytes(out, d->allocated);
    } else {
        rs_report_text_signed_bytes(out, rs_sat_sub_i64(rs_sat_i64(d->allocated), rs_sat_i64(d->reference_allocated)));
        fputs(" (", out);
        rs_report_text_bytes(out, d->allocated);
        fputs(" vs ", out);
        rs_report_text_bytes(out, d->reference_allocated);
    }
    fputs("); it holds ", out);
    rs_report_text_pct(out, d->divergence_pct);
    fprintf(out, " %s than the median%s (", d->divergence_pct >= 0 ? "more" : "less", of);
    rs_report_text_bytes(out, d->peak_allocated);
    fputs(" vs ", out);
    rs_report_text_bytes(out, median);
    fputs(": peak allocated plus the pools' free bytes, which a CUDA graph keeps for its replays)", out);
    if (d->growth) {
        fputs(", its allocated bytes growing ", out);
        print_growth_rate(out, d);
    }
    print_exhaustion(out, d);
    print_sites_inline(out, d->sites, d->n_sites);
    print_unattributed(out, d);
    fputc('\n', out);
}

static void print_divergent(FILE *out, const rs_compare_result *r, const rs_compare_divergent *d)
{
    const char *dir = d->divergence_pct >= 0 ? "above" : "below";
    int grouped = d->role >= 0 && (size_t)d->role < r->n_roles;
    const char *of = grouped ? " of its role" : "";
    if (d->by_pools) {
        print_divergent_pools(out, r, d, of, grouped ? r->roles[d->role].median_peak : r->median_peak);
        return;
    }
    if (d->growth) {
        print_growth(out, r, d);
        fputs(", peaking ", out);
        rs_report_text_pct(out, d->divergence_pct);
        fprintf(out, " %s the median%s (", dir, of);
    } else {
        fprintf(out, "rank %" PRId32, d->rank);
        print_role(out, r, d->role);
        fputs(" peaks ", out);
        rs_report_text_pct(out, d->divergence_pct);
        fprintf(out, " %s the median%s (", dir, of);
    }
    rs_report_text_bytes(out, d->peak_allocated);
    fputs(" vs ", out);
    rs_report_text_bytes(out, grouped ? r->roles[d->role].median_peak : r->median_peak);
    if (r->by_held) fputs(", with the private pools' free bytes", out);
    fputc(')', out);
    if (!d->growth && d->first_divergent_step >= 0)
        fprintf(out, " from step %" PRId64 ", a constant offset", d->first_divergent_step);
    print_exhaustion(out, d);
    print_sites_inline(out, d->sites, d->n_sites);
    print_unattributed(out, d);
    fputc('\n', out);
}

/* One row per role, and the role nearest to running out. */
static void print_roles(FILE *out, const rs_compare_result *r)
{
    fputs("roles (from ", out);
    rs_text_put(out, r->grouping);
    if (r->replicas[0]) {
        fputs(", the replicas along ", out);
        rs_text_put(out, r->replicas);
    }
    fputs("); each rank is compared with the median of its role\n", out);
    if (r->grouping_basis[0]) {
        fputs("  based on ", out);
        rs_text_put(out, r->grouping_basis);
        fputc('\n', out);
    }
    int w = 16; /* the longest label's width: found roles are labelled with their ranks */
    for (size_t k = 0; k < r->n_roles; k++)
        if ((int)strlen(r->roles[k].label) > w) w = (int)strlen(r->roles[k].label);
    fprintf(out, "  %-*s %5s %12s %12s %6s %12s\n", w, "role", "ranks", "median peak", "max peak",
            "rank", "headroom");
    for (size_t k = 0; k < r->n_roles; k++) {
        const rs_compare_role *x = &r->roles[k];
        char med[32], max[32], head[32];
        rs_text_format_bytes(x->median_peak, med, sizeof med);
        rs_text_format_bytes(x->max_peak, max, sizeof max);
        if (x->capacity && x->headroom >= 0)
            rs_text_format_bytes((uint64_t)x->headroom, head, sizeof head);
        else if (x->capacity)
            snprintf(head, sizeof head, "none");
        else
            snprintf(head, sizeof head, "-");
        fprintf(out, "  %-*s %5zu %12s %12s %6" PRId32 " %12s%s\n", w, x->label, x->n_ranks, med, max,
                x->max_rank, head, (int32_t)k == r->nearest_role ? "  <- nearest its limit" : "");
    }
    if (r->nearest_role >= 0) {
        const rs_compare_role *x = &r->roles[r->nearest_role];
        fprintf(out, "role %s is nearest to running out: rank %" PRId32 " peaks ", x->label,
                x->max_rank);
        rs_report_text_bytes(out, x->max_peak);
        if (x->capacity) {
            fputs(" of ", out);
            rs_report_text_bytes(out, x->capacity);
            fputs(", ", out);
            rs_report_text_bytes(out, x->headroom > 0 ? (uint64_t)x->headroom : 0);
            fputs(" left", out);
        } else {
            fputs(" (capacity unknown: the heaviest role)", out);
        }
        fputc('\n', out);
    }
    if (r->heavy_role >= 0) {
        fprintf(out, "role %s is heavier than %s by ", r->roles[r->heavy_role].label,
                r->roles[r->light_role].label);
        rs_report_text_bytes(out, r->role_gap > 0 ? (uint64_t)r->role_gap : 0);
        fputs(" (median peaks)", out);
        print_sites_inline(out, r->role_gap_sites, r->n_role_gap_sites);
        fputc('\n', out);
    }
    fputc('\n', out);
}

static void print_missing(FILE *out, const rs_compare_result *r)
{
    fprintf(out, "missing: rank%s ", r->n_missing == 1 ? "" : "s");
    for (size_t i = 0; i < r->n_missing;) {
        size_t j = i;
        while (j + 1 < r->n_missing && r->missing[j + 1] == r->missing[j] + 1) j++;
        if (i) fputs(", ", out);
        if (j == i)
            fprintf(out, "%" PRId32, r->missing[i]);
        else
            fprintf(out, "%" PRId32 "-%" PRId32, r->missing[i], r->missing[j]);
        i = j + 1;
    }
    fputs(" (no data: no snapshot, or none within the gather timeout)\n", out);
}

/* What a rank with no data is said to be rests on what its file shows: no allocation in its
 * range, none held when the range began, no OOM, nothing taken outside the allocator; then, rank
 * by rank, what its file says of why (endings.h) and the device memory no call accounts for. */
static void print_no_data(FILE *out, const rs_compare_result *r)
{
    fprintf(out, "no data: rank%s ", r->n_no_data == 1 ? "" : "s");
    for (size_t i = 0; i < r->n_no_data; i++) fprintf(out, "%s%" PRId32, i ? ", " : "", r->no_data[i]);
    fputs(" recorded nothing: no allocation in the range, none held when it began, no OOM, no "
          "memory taken outside the allocator; left out of the median and the verdicts\n", out);
    for (size_t k = 0; k < r->n_ranks; k++) {
        const rs_summary *s = &r->ranks[k];
        if (!is_no_data(r, s->rank)) continue;
        char why[1024];
        if (rs_endings_no_data_why(s, why, sizeof why)) fprintf(out, "  rank %" PRId32 ": %s\n", s->rank, why);
        if (!s->outside_end) continue;
        int own = s->outside_of == RS_OUTSIDE_PROCESS;
        fprintf(out, own ? "  rank %" PRId32 ": its process held "
                         : "  rank %" PRId32 ": its device showed ", s->rank);
        rs_report_text_bytes(out, s->outside_end);
        fputs(own ? " on its device" : " in use (every process on it counted)", out);
        fputs(" that no call ranksnap saw accounts for (taken before ranksnap started, or "
              "through calls it does not intercept: docs/GPU.md, \"Interception\")\n", out);
    }
}

ranksnap_status rs_report_text(FILE *out, const rs_compare_result *r)
{
    if (!out || !r) return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_report_text: NULL argument");
    fprintf(out, "ranksnap: %zu of %d rank%s", r->n_ranks, r->world_size,
            r->world_size == 1 ? "" : "s");
    if (r->reference_rank >= 0) {
        fprintf(out, ", reference rank %" PRId32 " (median peak ", r->reference_rank);
        rs_report_text_bytes(out, r->median_peak);
        fputc(')', out);
    }
    fputs("\n\n", out);
    if (r->n_ranks) {
        print_table(out, r);
        fputc('\n', out);
        print_steps_from(out, r);
        print_recorded_by(out, r);
        print_async_pool(out, r);
        print_pools(out, r);
        print_device_use(out, r);
        print_outside_holders(out, r);
        print_recorded_outside(out, r);
    }
    if (r->n_roles) print_roles(out, r);
    for (size_t i = 0; i < r->n_oom; i++) print_oom(out, r, &r->oom[i]);
    for (size_t i = 0; i < r->n_divergent; i++) print_divergent(out, r, &r->divergent[i]);
    if (r->n_ranks == 0)
        fputs("no rank to compare\n", out);
    else if (r->n_divergent == 0)
        fprintf(out, "no rank diverges beyond %g%% of the median%s\n", r->divergence_pct,
                r->n_roles ? " of its role" : "");
    if (r->n_missing) print_missing(out, r);
    if (r->n_no_data) print_no_data(out, r);
    for (size_t i = 0; i < r->n_notes; i++) {
        fputs("note: ", out);
        rs_text_put(out, r->notes[i]);
        fputc('\n', out);
    }
    if (ferror(out) || fflush(out) != 0)
        return rs_error(RANKSNAP_ERR_IO, "writing the text report failed: %s", strerror(errno));
    return RANKSNAP_OK;
}
