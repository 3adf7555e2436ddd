#!/bin/sh
# `ranksnap report` over a job too large for the first pass to keep each rank's sites
# (cmd_report.c, RS_REPORT_KEEP_BYTES: 64 MiB expected, 3 times a .rsnap file): the second pass
# reads the flagged rank and the reference again and makes their sites there, so that the
# verdict names the site in full, the same with one thread or two.
# usage: report_second_pass.sh RANKSNAP REPORT_BENCH_RANK DIR
set -u
ranksnap=$1 rank_prog=$2 dir=$3

rm -rf "$dir" && mkdir -p "$dir" || exit 1
# three ranks of 500,000 events (8.7 MB each: 26 MB, 78 MB expected), rank 1 holding 16 MiB
# more from a site of its own
for r in 0 1 2; do
    RANKSNAP_DIR="$dir" "$rank_prog" --rank $r --size 3 --events 500000 --diverge-rank 1 || exit 1
done
total=$(cat "$dir"/rank-*.rsnap | wc -c)
echo "three ranks, $total bytes"
# the second pass is only taken above 64 MiB expected
test "$total" -gt $((64 * 1024 * 1024 / 3)) || { echo "the files are too small to need a second pass"; exit 1; }
for j in 1 2; do
    "$ranksnap" report --jobs $j "$dir" > "$dir/jobs-$j.txt" 2> "$dir/jobs-$j.err" || exit 1
done
cat "$dir/jobs-1.txt"
cmp "$dir/jobs-1.txt" "$dir/jobs-2.txt" || exit 1
grep -q '^rank 1 peaks 15% above the median .*+16.00 MiB at site_divergent_buffer (bench_sites.h:[0-9]*)' \
    "$dir/jobs-1.txt" || exit 1
# both ranks' sites in full: no fallback to the summaries' top sites
! grep -q 'no full snapshot of both' "$dir/jobs-1.txt"
