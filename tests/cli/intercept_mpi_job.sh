#!/bin/sh
# Two ranks of an mpirun job (MPIEXEC) of PROGRAM with libranksnap.so preloaded (PRELOAD): every
# CUDA call of both succeeds, and the report the job leaves in DIR flags rank 1.
# usage: intercept_mpi_job.sh PROGRAM DIR MPIEXEC PRELOAD
set -u
program=$1 dir=$2 mpiexec=$3 preload=$4

rm -rf "$dir" && mkdir -p "$dir" || exit 1
out=$(RANKSNAP_DIR="$dir" "$mpiexec" -np 2 --oversubscribe --allow-run-as-root --mca btl self,vader \
      -x LD_PRELOAD="$preload" -x RANKSNAP_DIR "$program" 2>&1); rc=$?; echo "$out"; test $rc -eq 0 || exit 1
test $(echo "$out" | grep -c 'all calls succeeded') -eq 2 || exit 1
grep -q 'rank 1 peaks 94% above the median' "$dir/report.txt" || { cat "$dir/report.txt"; exit 1; }
