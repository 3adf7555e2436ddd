/*
 * replay_report.c — a replay's result for people (text) and for machines (JSON), side by side
 * with the original.
 */
#include <inttypes.h>
#include <stdio.h>

#include "json_write.h"
#include "replay_report.h"
#include "text.h"


static void ratio(char *buf, size_t n, uint64_t reserved, uint64_t allocated)
{
    if (allocated == 0)
        snprintf(buf, n, "-");
    else
        snprintf(buf, n, "%.3f", (double)reserved / (double)allocated);
}

void rs_replay_report_text(FILE *out, const char *name, const rs_replay_result *r)
{
    char a[32], b[32], ra[16], rb[16];
    fprintf(out, "replay of %s: %" PRIu64 " events, %" PRIu64 " allocations, %" PRIu64
                 " frees, %" PRIu64 " blocks alive before the history\n",
            name, r->events, r->allocs, r->frees, r->preexisting);
    fprintf(out, "%-26s %18s %18s\n", "", "original", "ranksnap");
    rs_text_format_bytes(r->original.peak_allocated, a, sizeof a);
    rs_text_format_bytes(r->ranksnap.peak_allocated, b, sizeof b);
    fprintf(out, "%-26s %18s %18s\n", "peak allocated", a, b);
    rs_text_format_bytes(r->original.peak_reserved, a, sizeof a);
    rs_text_format_bytes(r->ranksnap.peak_reserved, b, sizeof b);
    fprintf(out, "%-26s %18s %18s\n", "peak reserved", a, b);
    ratio(ra, sizeof ra, r->original.peak_reserved, r->original.peak_allocated);
    ratio(rb, sizeof rb, r->ranksnap.peak_reserved, r->ranksnap.peak_allocated);
    fprintf(out, "%-26s %18s %18s\n", "reserved / allocated", ra, rb);
    fprintf(out, "%-26s %18" PRIu64 " %18" PRIu64 "\n", "peak allocated, bytes",
            r->original.peak_allocated, r->ranksnap.peak_allocated);
    fprintf(out, "%-26s %18" PRIu64 " %18" PRIu64 "\n", "peak reserved, bytes",
            r->original.peak_reserved, r->ranksnap.peak_reserved);
    rs_text_format_bytes(r->ranksnap_peak_allocated_blocks, b, sizeof b);
    fprintf(out, "(allocated = live requests rounded up to 512 B; ranksnap's blocks, with the tails "
                 "of segments too small to split, peaked at %s)\n", b);
    if (r->original.peak_reserved && r->ranksnap.peak_reserved != r->original.peak_reserved) {
        double d = ((double)r->ranksnap.peak_reserved - (double)r->original.peak_reserved) /
                   (double)r->original.peak_reserved * 100.0;
        fprintf(out, "ranksnap reserves %.1f%% %s than the original at the peak\n",
                d < 0 ? -d : d, d < 0 ? "less" : "more");
    }
    if (r->incomplete)
        fprintf(out, "incomplete: the ring dropped %" PRIu64 " older events; replayed what is "
                     "there, from the blocks alive at its start\n", r->dropped);
    if (r->inconsistent)
        fprintf(out, "note: %" PRIu64 " events did not fit the blocks alive at that moment (frees "
                     "of blocks not alive, allocations over live ones): the history has gaps\n",
                r->inconsistent);
    if (r->original_ooms || r->ranksnap_ooms)
        fprintf(out, "out of memory: %" PRIu64 " times in the original, %" PRIu64
                     " replayed requests failed in ranksnap\n",
                r->original_ooms, r->ranksnap_ooms);
}

void rs_replay_report_json(FILE *out, const char *name, const rs_replay_result *r)
{
    fprintf(out, "{\n  \"file\": ");
    rs_json_string(out, name, RS_JSON_PLAIN);
    fprintf(out,
            ",\n  \"original\": {\"peak_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
            "},\n  \"ranksnap\": {\"peak_allocated\": %" PRIu64 ", \"peak_reserved\": %" PRIu64
            ", \"peak_allocated_blocks\": %" PRIu64 "},\n",
            r->original.peak_allocated, r->original.peak_reserved, r->ranksnap.peak_allocated,
            r->ranksnap.peak_reserved, r->ranksnap_peak_allocated_blocks);
    fprintf(out,
            "  \"events\": %" PRIu64 ",\n  \"allocs\": %" PRIu64 ",\n  \"frees\": %" PRIu64
            ",\n  \"preexisting_blocks\": %" PRIu64 ",\n  \"incomplete\": %s,\n  \"dropped\": %" PRIu64
            ",\n  \"inconsistent_events\": %" PRIu64 ",\n  \"original_ooms\": %" PRIu64
            ",\n  \"ranksnap_ooms\": %" PRIu64 "\n}\n",
            r->events, r->allocs, r->frees, r->preexisting, r->incomplete ? "true" : "false",
            r->dropped, r->inconsistent, r->original_ooms, r->ranksnap_ooms);
}
