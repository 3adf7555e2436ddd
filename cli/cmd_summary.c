/*
 * cmd_summary.c — `ranksnap summary FILE...`: each snapshot told to a person in a screenful.
 *
 * Reads only the decoded model. Allocation sites are the innermost frame of each live block's
 * stack, grouped by function, file and line rather than by pc: two return addresses on one source
 * line are one site to the person reading, and the same grouping matches sites across ranks whose
 * libraries loaded at different addresses. Frames that were not resolved keep their pc in the key,
 * since "??" alone would lump unrelated code together. Every string of the file (host, job,
 * device, names of functions, files and modules) is printed escaped (rs_text_put, common/text.h):
 * a crafted snapshot must not drive the terminal it is summarised on.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_summary.h"
#include "decode.h"
#include "endings.h"
#include "errors.h"
#include "options.h"
#include "site_rules.h"
#include "sites.h"
#include "summary.h"
#include "text.h"

#define SUMMARY_TOP_SITES 10

typedef struct site {
    const rs_snap_frame *frame; /* NULL = the block has no stack */
    rs_site name;           /* as the reports name it (sites.h): demangled, or a label */
    const char *module;     /* for unresolved frames         */
    uint64_t bytes;
    uint64_t blocks;
} site;

static int unresolved(const rs_snap_frame *f)
{
    return strcmp(f->function, "??") == 0;
}

static int cmp_site_key(const void *pa, const void *pb)
{
    const site *x = pa, *y = pb;
    const rs_snap_frame *a = x->frame, *b = y->frame;
    if (!a || !b) return (a != NULL) - (b != NULL);
    int c = rs_site_cmp(&x->name, &y->name);
    if (c) return c;
    if (unresolved(a) && a->pc != b->pc) return a->pc < b->pc ? -1 : 1;
    return 0;
}

static int cmp_site_bytes(const void *pa, const void *pb)
{
    const site *a = pa, *b = pb;
    if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
    return cmp_site_key(pa, pb);
}

static void print_site(FILE *out, const site *st)
{
    const rs_snap_frame *f = st->frame;
    const char *module = st->module ? st->module : "??";
    if (!f) {
        fputs("(no stack recorded)", out);
    } else if (unresolved(f)) {
        fprintf(out, "0x%" PRIx64 " in ", f->pc);
        rs_text_put(out, module);
    } else if (!st->name.file[0]) {
        rs_text_put(out, st->name.function);
    } else if (strcmp(st->name.file, "??") == 0) {
        rs_text_put(out, st->name.function);
        fputs(" (", out);
        rs_text_put(out, module);
        fputc(')', out);
    } else {
        rs_text_put(out, st->name.function);
        fputc(' ', out);
        rs_text_put(out, st->name.file);
        fprintf(out, ":%" PRId32, st->name.line);
    }
}

static const char *module_of(const rs_snap *s, const rs_snap_frame *f)
{
    if (!f || f->module < 0 || (size_t)f->module >= s->n_modules) return NULL;
    const char *p = s->modules[f->module].path;
    return *p ? rs_text_basename(p) : "(main program)";
}

/* The sites of the live blocks, merged, sorted by live bytes; *n_out distinct sites. */
static ranksnap_status top_sites(const rs_snap *s, const char *path, site **out,
                                 size_t *n_out, uint64_t *live_blocks, uint64_t *live_bytes)
{
    size_t n = 0;
    *live_blocks = 0;
    *live_bytes = 0;
    for (size_t i = 0; i < s->n_segments; i++)
        for (size_t k = 0; k < s->segments[i].n_blocks; k++)
            if (s->segments[i].blocks[k].state == RS_BLOCK_ACTIVE_ALLOCATED) n++;
    site *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return rs_error(RANKSNAP_ERR_HOST_MEMORY, "%s: no memory for %zu allocation sites",
                        path ? path : "summary", n);
    /* the frame the report names the site after (collector/analyze/sites.h) */
    rs_site_picker pk;
    rs_site_picker_init(&pk, s);
    n = 0;
    for (size_t i = 0; i < s->n_segments; i++) {
        for (size_t k = 0; k < s->segments[i].n_blocks; k++) {
            const rs_snap_block *b = &s->segments[i].blocks[k];
            if (b->state != RS_BLOCK_ACTIVE_ALLOCATED) continue;
            int64_t fi = rs_site_pick_frame(&pk, b->stack);
            v[n].frame = fi >= 0 ? &s->frames[fi] : NULL;
            rs_site_pick(&pk, b->stack, &v[n].name);
            v[n].module = module_of(s, v[n].frame);
            v[n].bytes = b->size;
            v[n].blocks = 1;
            *live_bytes += b->size;
            n++;
        }
    }
    rs_site_picker_free(&pk);
    *live_blocks = n;
    qsort(v, n, sizeof *v, cmp_site_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && cmp_site_key(&v[m - 1], &v[i]) == 0) {
            v[m - 1].bytes += v[i].bytes;
            v[m - 1].blocks += v[i].blocks;
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof *v, cmp_site_bytes);
    *out = v;
    *n_out = m;
    return RANKSNAP_OK;
}

static void print_oom(FILE *out, const rs_snap *s)
{
    const rs_snap_oom *o = &s->oom;
    char req[32], rnd[32], fr[32], tot[32], al[32], rs[32], lim[32];
    rs_text_format_bytes(o->requested, req, sizeof req);
    rs_text_format_bytes(o->rounded, rnd, sizeof rnd);
    rs_text_format_bytes(o->device_free, fr, sizeof fr);
    rs_text_format_bytes(o->device_total, tot, sizeof tot);
    rs_text_format_bytes(o->allocated, al, sizeof al);
    rs_text_format_bytes(o->reserved, rs, sizeof rs);
    if (o->memory_limit)
        rs_text_format_bytes(o->memory_limit, lim, sizeof lim);
    else
        snprintf(lim, sizeof lim, "none");
    /* a request is never of 0 bytes: 0 is a framework's error that did not say its size */
    if (o->requested)
        fprintf(out, "OUT OF MEMORY at step %" PRId64 ": tried to allocate %s (rounded to %s)", o->step,
                req, rnd);
    else
        fprintf(out, "OUT OF MEMORY at step %" PRId64 ": tried to allocate (size not known)", o->step);
    /* which device ran out, where the rank used more than one or another than its first */
    if (s->n_devices > 1 || o->device != s->device.index) fprintf(out, " on device %d", o->device);
    fputc('\n', out);
    fprintf(out, "  device free %s of %s; allocated %s, reserved %s, memory limit %s\n", fr, tot,
            al, rs, lim);
    rs_site_picker pk;
    rs_site_picker_init(&pk, s);
    rs_site at;
    rs_site_path path;
    rs_site_pick_path(&pk, o->stack, &at, &path);
    rs_site_picker_free(&pk);
    char where[RS_SITE_PATH_MAX * (RS_SITE_FUNC_LEN + RS_SITE_FILE_LEN + 16)];
    rs_site_path_format(&path, where, sizeof where);
    fprintf(out, "  at %s (stream 0x%" PRIx64 ")\n", where, s->streams[o->stream]);
}

ranksnap_status rs_cmd_summary_print(FILE *out, const rs_snap *s, const char *path)
{
    if (!out || !s)
        return rs_error(RANKSNAP_ERR_INVALID_ARGUMENT, "rs_cmd_summary_print: NULL argument");
    const char *name = path ? path : "snapshot";
    const rs_snap_totals *t = &s->totals;
    char a[32], b[32], c[32];

    site *sites = NULL;
    size_t n_sites = 0;
    uint64_t live_blocks, live_bytes;
    RS_CHECK(top_sites(s, name, &sites, &n_sites, &live_blocks, &live_bytes));

    if (path) {
        rs_text_put(out, path);
        fputc('\n', out);
    }
    fprintf(out, "  rank        %d of %d on ", s->rank, s->world_size);
    rs_text_put(out, s->host);
    fprintf(out, ", pid %" PRId64, s->pid);
    if (s->job[0]) {
        fputs(", job ", out);
        rs_text_put(out, s->job);
    }
    fputc('\n', out);
    rs_text_format_bytes(s->device.total_bytes, a, sizeof a);
    fprintf(out, "  device      %d: ", s->device.index);
    rs_text_put(out, s->device.name);
    fprintf(out, ", %s (", a);
    rs_text_put(out, s->device.uuid);
    fputs("), backend ", out);
    rs_text_put(out, s->backend);
    fputc('\n', out);
    if (s->n_devices > 1) {
        /* a rank that allocated on several devices: each, in the order it first used them */
        fputs("  devices     ", out);
        for (size_t i = 0; i < s->n_devices; i++) {
            rs_text_format_bytes(s->devices[i].reserved_bytes_peak, a, sizeof a);
            fprintf(out, "%s%d (%s peak reserved)", i ? ", " : "", s->devices[i].index, a);
        }
        fputc('\n', out);
    }
    fprintf(out, "  snapshot    %s\n",
            s->complete ? "complete" : "INCOMPLETE (written from a crash path)");
    char ended[256];
    if (rs_endings_words(&s->end, ended, sizeof ended)) fprintf(out, "  ended       %s\n", ended);
    if (s->time.steps_from) {
        /* only where the file says how its steps were numbered: older files print as before */
        fputs("  steps       ", out);
        rs_text_put(out, s->time.steps_from);
        for (size_t i = 0; i < s->time.n_ranges; i++) {
            const rs_snap_range *r = &s->time.ranges[i];
            fprintf(out, "%s%" PRId64, i ? ", " : "; recorded ", r->begin);
            if (r->end < 0) fputs(" on", out);
            else if (r->end > r->begin) fprintf(out, "..%" PRId64, r->end - 1);
        }
        fprintf(out, "; step now %" PRId64 "\n", s->time.current_step);
    }

    rs_text_format_bytes(t->allocated_bytes_peak, a, sizeof a);
    rs_text_format_bytes(t->allocated_bytes_current, b, sizeof b);
    fprintf(out, "  allocated   peak %s", a);
    if (t->peak_step >= 0) fprintf(out, " at step %" PRId64, t->peak_step);
    fprintf(out, ", now %s\n", b);
    rs_text_format_bytes(t->reserved_bytes_peak, a, sizeof a);
    rs_text_format_bytes(t->reserved_bytes_current, b, sizeof b);
    fprintf(out, "  reserved    peak %s, now %s\n", a, b);
    rs_text_format_bytes(t->active_bytes_peak, a, sizeof a);
    rs_text_format_bytes(t->active_bytes_current, b, sizeof b);
    fprintf(out, "  active      peak %s, now %s\n", a, b);
    if (t->async_bytes_peak) {
        /* a rank recorded natively: its allocator is the framework's stream-ordered pool, and
         * the three lines above, ranksnap's own allocator's, read 0 */
        rs_text_format_bytes(t->async_bytes_peak, a, sizeof a);
        fprintf(out, "  pool        peak %s live in the cudaMallocAsync pool (the rank's allocator)", a);
        if (t->async_reserved_at_peak) {
            rs_text_format_bytes(t->async_reserved_at_peak, b, sizeof b);
            fprintf(out, ", %s reserved then", b);
        }
        fputc('\n', out);
    }
    if (t->memory_limit_bytes) {
        rs_text_format_bytes(t->memory_limit_bytes, a, sizeof a);
        fprintf(out, "  limit       %s (RANKSNAP_MEMORY_LIMIT)\n", a);
    }
    rs_text_format_bytes(t->outside_bytes_peak, a, sizeof a);
    rs_text_format_bytes(t->outside_bytes_end, b, sizeof b);
    const char *of = t->outside_of == RS_OUTSIDE_PROCESS
                         ? "this process's device memory not from the allocator"
                     : t->outside_of == RS_OUTSIDE_DEVICE
                         ? "the device's use beyond the allocator, every process's"
                         : "device memory not from the allocator";
    fprintf(out, "  outside     peak %s, at end %s (%s)\n", a, b, of);
    if (t->outside_of == RS_OUTSIDE_DEVICE) {
        fprintf(out, "  not own     this process's own use was not known (%s",
                rs_outside_why_name((unsigned)t->outside_why));
        if (t->outside_why_detail) {
            fputs(": ", out);
            rs_text_put(out, t->outside_why_detail);
        }
        fputs(")\n", out);
    }
    if (s->device.processes) {
        /* what NVML listed on the device: the other processes there, and this one's own */
        fprintf(out, "  sharing     %" PRIu32 " process%s on the device (NVML)", s->device.processes,
                s->device.processes == 1 ? "" : "es");
        /* not found among them, this process cannot tell which of them are the others */
        if (t->outside_why != RS_OUTSIDE_WHY_PID_NOT_LISTED) {
            rs_text_format_bytes(s->device.others_bytes, a, sizeof a);
            fprintf(out, "; the others hold %s", a);
        }
        if (s->device.others_unknown)
            fprintf(out, " (%" PRIu32 " with no figure)", s->device.others_unknown);
        if (s->device.own_bytes) {
            rs_text_format_bytes(s->device.own_bytes, b, sizeof b);
            fprintf(out, ", this one %s", b);
        }
        fputc('\n', out);
    }
    int held = 0;
    for (size_t i = 0; i < t->n_outside_labels; i++) {
        /* the pool's bytes are the allocator's (the pool line), not outside it */
        if (!t->outside_labels[i].bytes || !strcmp(t->outside_labels[i].label, "async_pool")) continue;
        rs_text_format_bytes(t->outside_labels[i].bytes, a, sizeof a);
        fputs(held ? ", " : "  held by    ", out);
        rs_text_put(out, rs_summary_outside_label_name(t->outside_labels[i].label));
        fprintf(out, " holds %s", a);
        held = 1;
    }
    if (held) fputs(" (of the bytes outside, at the snapshot)\n", out);
    fprintf(out, "  calls       %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64
                 " retries, %" PRIu64 " OOMs\n",
            t->num_allocs, t->num_frees, t->num_alloc_retries, t->num_ooms);
    fprintf(out, "  events      %" PRIu64 " recorded, %" PRIu64 " dropped (history holds %" PRIu64
                 " of %" PRIu64 ")\n", t->events_recorded, t->events_dropped, s->history.count,
            s->history.capacity);
    rs_text_format_bytes(live_bytes, c, sizeof c);
    fprintf(out, "  segments    %zu, live blocks %" PRIu64 " holding %s\n", s->n_segments,
            live_blocks, c);

    if (s->has_oom) print_oom(out, s);

    if (n_sites) {
        fprintf(out, "top allocation sites by live bytes:\n");
        for (size_t i = 0; i < n_sites && i < SUMMARY_TOP_SITES; i++) {
            rs_text_format_bytes(sites[i].bytes, a, sizeof a);
            fprintf(out, "  %12s  %6" PRIu64 " block%s  ", a, sites[i].blocks,
                    sites[i].blocks == 1 ? " " : "s");
            print_site(out, &sites[i]);
            fputc('\n', out);
        }
        if (n_sites > SUMMARY_TOP_SITES)
            fprintf(out, "  ... and %zu more sites\n", n_sites - SUMMARY_TOP_SITES);
    }
    free(sites);

    /* Live blocks at the end are often few (a program frees its tensors before it exits); the
     * question is usually what was live at the peak, which the history answers. */
    rs_site *peak = NULL;
    rs_site_path *paths = NULL;
    size_t n_peak = 0;
    if (s->history.count > 0 && rs_site_list_at_peak(s, &peak, &paths, &n_peak) == RANKSNAP_OK && n_peak) {
        if (s->has_oom)
            fprintf(out, "largest allocation sites at the OOM:\n");
        else
            fprintf(out, "largest allocation sites at the peak (step %" PRId64 "):\n", t->peak_step);
        for (size_t i = 0; i < n_peak && i < SUMMARY_TOP_SITES; i++) {
            rs_text_format_bytes((uint64_t)(peak[i].bytes > 0 ? peak[i].bytes : 0), a, sizeof a);
            char where[RS_SITE_PATH_MAX * (RS_SITE_FUNC_LEN + RS_SITE_FILE_LEN + 16)];
            rs_site_path_format(&paths[i], where, sizeof where);
            fprintf(out, "  %12s  %6d block%s  ", a, (int)peak[i].blocks,
                    peak[i].blocks == 1 ? " " : "s");
            rs_text_put(out, where);
            fputc('\n', out);
        }
    }
    free(peak);
    free(paths);

    if (ferror(out) || fflush(out) != 0)
        return rs_error(RANKSNAP_ERR_IO, "%s: writing the summary failed: %s", name,
                        strerror(errno));
    return RANKSNAP_OK;
}

/* The operands, moved to the front of argv, and the site flags; -1 (and *code) to stop. */
static int summary_args(const rs_cli_verb *verb, int argc, char **argv, int *code)
{
    rs_cli_args it;
    rs_cli_args_init(&it, argc, argv);
    const char *arg, *skip = NULL;
    int n = 0, kind, all_frames = 0, got;
    while ((kind = rs_cli_next(verb, &it, &arg)) != RS_CLI_END) {
        if (kind == RS_CLI_HELP) {
            *code = RS_EXIT_OK;
            return -1;
        }
        if (kind == RS_CLI_OPERAND)
            argv[n++] = (char *)arg;
        else if (strcmp(arg, "--all-frames") == 0)
            all_frames = 1;
        else if ((got = rs_cli_flag_value("--site-skip", argc, argv, &it.i, &skip)) == 0 || got < 0) {
            *code = rs_cli_usage_error(verb, got < 0 ? "%s expects a value" : "unknown option '%s'", arg);
            return -1;
        }
    }
    if (rs_site_rules_set(skip, all_frames) != RANKSNAP_OK) {
        *code = rs_cli_usage_error(verb, "--site-skip %s", ranksnap_last_error());
        return -1;
    }
    if (n == 0) *code = rs_cli_usage_error(verb, "expected at least one FILE");
    return n ? n : -1;
}

static int run_summary(const rs_cli_verb *verb, int argc, char **argv)
{
    int code = RS_EXIT_OK;
    int n = summary_args(verb, argc, argv, &code);
    if (n < 0) return code;
    for (int i = 0; i < n; i++) {
        rs_snap *snap = NULL;
        ranksnap_status st = rs_decode_file(argv[i], NULL, &snap);
        if (st == RANKSNAP_OK) st = rs_cmd_summary_print(stdout, snap, argv[i]);
        rs_snap_free(snap);
        if (st != RANKSNAP_OK) {
            rs_cli_failure("ranksnap", argv[i], st);
            code = RS_EXIT_FAILED;
        }
    }
    return code;
}

const rs_cli_verb rs_cmd_summary = {
    "summary", "FILE... [--site-skip PATTERNS] [--all-frames]",
    "print identity, totals and peaks of each .rsnap snapshot",
    "  --site-skip PATTERNS, --all-frames\n"
    "                   which frames may be a site, as for `ranksnap report`\n",
    run_summary};
