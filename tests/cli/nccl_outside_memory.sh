#!/bin/sh
# NCCL's device memory in a snapshot of test_gpu_nccl (PROGRAM, run with LD_PRELOAD=PRELOAD): the
# communicator's as "NCCL holds" (PATTERN) and an ncclMemAlloc buffer's as "ncclMemAlloc holds",
# in the summary and the JSON report, and neither once they are gone; and its steps, found from its
# reduce-scatters and all-gathers, or counted on its all-gathers (RANKSNAP_STEP_ON). 77 from PROGRAM without a
# usable device.
# usage: nccl_outside_memory.sh PROGRAM RANKSNAP DIR PRELOAD PATTERN
set -u
program=$1 ranksnap=$2 dir=$3 preload=$4 pattern=$5

rm -rf "$dir" && mkdir -p "$dir" || exit 1
LD_PRELOAD="$preload" "$program" "$dir/with-comm.rsnap" "$dir/after.rsnap"; rc=$?; test $rc -eq 0 || exit $rc
a=$("$ranksnap" summary "$dir/with-comm.rsnap") || exit 1; echo "$a"
echo "$a" | grep -Eq "$pattern" || { echo "missing: $pattern"; exit 1; }
echo "$a" | grep -q 'ncclMemAlloc holds 8.00 MiB' || { echo 'missing: ncclMemAlloc holds 8.00 MiB'; exit 1; }
j=$("$ranksnap" report --json "$dir/with-comm.rsnap") || exit 1
echo "$j" | grep -Eq '"nccl": [1-9]' || { echo 'missing in the JSON report: "nccl"'; exit 1; }
# the steps, found from the reduce-scatters and all-gathers
steps='"steps_from": "detected: ncclReduceScatter x1, ncclAllGather x1 per step, '
echo "$j" | grep -q "$steps" || { echo "missing in the JSON report: $steps"; echo "$j" | grep steps_from; exit 1; }
# or counted on one of them
RANKSNAP_STEP_ON=ncclAllGather:2 LD_PRELOAD="$preload" "$program" "$dir/on.rsnap" "$dir/on-after.rsnap" > /dev/null || exit 1
steps='"steps_from": "RANKSNAP_STEP_ON=ncclAllGather:2"'
"$ranksnap" report --json "$dir/on.rsnap" | grep -q "$steps" || { echo "missing in the JSON report: $steps"; exit 1; }
b=$("$ranksnap" summary "$dir/after.rsnap") || exit 1; echo "$b"
echo "$b" | grep -Eq '(NCCL|ncclMemAlloc) holds' && { echo 'still held after ncclCommDestroy'; exit 1; }; exit 0
