#!/bin/sh
# The demo (DEMO) as one rank without mpirun (MPI's singleton init), run in the working folder:
# its snapshot read back by `ranksnap` (RANKSNAP), and the RANKSNAP_DIR it must refuse.
# usage: demo.sh CASE DEMO [RANKSNAP [SRC]]
set -u
name=$1 demo=$2 ranksnap=${3-} src=${4-}

# the snapshot it writes gives a summary naming its allocation site and a one-rank report
case_single_rank_writes_snapshot_summary_and_report() {
    rm -rf out1 && RANKSNAP_DIR=out1 "$demo" --iters 3 --quiet && { "$ranksnap" summary out1/rank-00000.rsnap && "$ranksnap" report out1 --out out1; } > out1.log && cat out1.log && grep -q 'block_activations .*demo.c:[0-9]' out1.log && grep -q '1 of 1 rank' out1.log && test -s out1/report.json
}

# a demo built -O2 or -O3 (DEMO, its source SRC): the optimiser folds the identical allocation
# helpers into one, which the sites look past (a wrapper, from the data) to the lines calling it:
# the largest site at the peak is the line of SRC that calls block_activations, the sites are
# lines of demo.c, never the inlined allocation call, ranksnap's own frames or a mangled name
case_optimized_build_names_the_callers_line() {
    rm -rf out2 && RANKSNAP_DIR=out2 "$demo" --iters 3 --quiet && "$ranksnap" summary out2/rank-00000.rsnap > out2.log || exit 1
    cat out2.log
    sed -n '/largest allocation sites at the peak/,$p' out2.log | tail -n +2 > out2.peak
    if grep -v '(demo.c:[0-9]*)$' out2.peak; then echo "a site that is not a line of demo.c"; exit 1; fi
    if grep -q 'demo_malloc\|ranksnap_malloc\|rs_alloc\|_Z' out2.peak; then echo "a helper or ranksnap's frame named as a site"; exit 1; fi
    top=$(head -1 out2.peak | sed 's/.*(demo.c:\([0-9]*\))$/\1/')
    sed -n "${top}p" "$src" | grep -q 'block_activations' || { echo "demo.c:$top does not allocate the activations: $(sed -n "${top}p" "$src")"; exit 1; }
}

# a RANKSNAP_DIR that is a symbolic link (another user could swap it) is refused, with the
# reason, and nothing is written through it
case_refuses_a_symlinked_ranksnap_dir() {
    rm -rf real link && mkdir real && ln -s real link && RANKSNAP_DIR=link "$demo" --iters 2 --quiet 2> err.symlink; cat err.symlink; grep -q 'RANKSNAP_DIR=link: is a symbolic link' err.symlink && test -z "$(ls real)"
}

# a RANKSNAP_DIR owned by another user is refused, with the reason (77 unless root, who alone
# can make one)
case_refuses_a_ranksnap_dir_of_another_user() {
    [ $(id -u) -eq 0 ] || { echo 'SKIPPED: needs root to give a directory to another user'; exit 77; }
    rm -rf theirs && mkdir theirs && chown nobody theirs && RANKSNAP_DIR=theirs "$demo" --iters 2 --quiet 2> err.owner; cat err.owner; grep -q 'RANKSNAP_DIR=theirs: owned by uid' err.owner && test -z "$(ls theirs)"
}

command -v "case_$name" >/dev/null || { echo "demo.sh: no case '$name'" >&2; exit 2; }
"case_$name"
