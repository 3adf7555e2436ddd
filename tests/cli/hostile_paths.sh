#!/bin/sh
# The command never trusts a path: rank files that are FIFOs or links to /dev/zero are refused at
# once, naming them (not read for ever, not waited on), and an output path that is a FIFO or a
# device node is refused, naming it, and left as it was (not replaced by a regular file).
# usage: hostile_paths.sh CASE DEMO RANKSNAP MPIEXEC WORKDIR
set -u
name=$1 demo=$2 ranksnap=$3 mpiexec=$4 w=$5
export RANKSNAP_BACKEND=sim OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*"; exit 1; }

# A one-rank snapshot to read: DIR/rank-00000.rsnap.
good() {
    rm -rf "$w" && mkdir -p "$w" || exit 1
    RANKSNAP_DIR="$w/good" RANKSNAP_REPORT=0 "$demo" --iters 3 --quiet || fail "the demo"
}

# ranks 1, 2 and 3 of a report directory are a link to /dev/zero, a FIFO and a FIFO ring: the
# report on rank 0 comes at once (within the 20 s that `timeout` gives it, instead of reading
# for ever or hanging), with one error naming each; `summary` and a pickle operand the same
case_fifo_and_dev_zero_rank_files_are_refused_at_once() {
    good
    d="$w/good"
    ln -s /dev/zero "$d/rank-00001.rsnap" && mkfifo "$d/rank-00002.rsnap" "$d/rank-00003.ring" \
        "$w/snapshot.pickle" || exit 1
    timeout 20 "$ranksnap" report "$d" > "$w/out" 2> "$w/err"; rc=$?; cat "$w/out" "$w/err"
    test $rc -eq 0 || fail "report: exit status $rc (124: it hung)"
    grep -q "rank-00001.rsnap: is a character device, expected a regular file" "$w/err" || fail "/dev/zero"
    grep -q "rank-00002.rsnap: is a FIFO, expected a regular file" "$w/err" || fail "the FIFO"
    grep -q "rank-00003.ring: is a FIFO, expected a regular file" "$w/err" || fail "the FIFO ring"
    grep -q '1 of 1 rank' "$w/out" || fail "no report on rank 0"
    timeout 20 "$ranksnap" summary "$d/rank-00002.rsnap" 2> "$w/err"; rc=$?; cat "$w/err"
    test $rc -eq 1 && grep -q 'is a FIFO' "$w/err" || fail "summary of a FIFO: $rc"
    timeout 20 "$ranksnap" report "$w/snapshot.pickle" 2> "$w/err"; rc=$?; cat "$w/err"
    test $rc -eq 1 && grep -q 'snapshot.pickle: is a FIFO' "$w/err" || fail "a FIFO pickle: $rc"
}

# `ranksnap collect --from DIR` where DIR holds a FIFO rank file: under mpirun, it names the FIFO
# and collects the rest instead of blocking in open()
case_collect_from_a_dir_with_a_fifo_goes_on() {
    good
    mkfifo "$w/good/rank-00001.rsnap" || exit 1
    timeout 60 $mpiexec -np 1 --oversubscribe --allow-run-as-root "$ranksnap" collect --from "$w/good" \
        --to "$w/to" > "$w/out" 2> "$w/err"
    rc=$?
    cat "$w/out" "$w/err"
    test $rc -ne 124 || fail "collect hung"
    grep -q 'rank-00001.rsnap: is a FIFO' "$w/err" || fail "the FIFO not named"
    test -e "$w/to/rank-00000.rsnap" && test ! -e "$w/to/rank-00001.rsnap" || fail "what was collected"
}

# Peak memory (KiB) of a command and its descendants, then its exit status: "KIB RC".
peak() {
    python3 -c 'import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)' "$@"
}

# A 2 GiB sparse file of zeros as a snapshot, a ring and a pickle operand: every verb refuses it
# at its first byte, naming it, in well under 64 MiB (each read the whole file into memory, 2 GiB
# and more, and took seconds); `collect` names it, sends nothing of it, and collects the rest.
# (77 without python3, which measures the peak.)
case_huge_rank_files_are_refused_at_their_first_bytes() {
    command -v python3 >/dev/null || exit 77
    good
    b="$w/big"
    mkdir -p "$b" "$w/from" || exit 1
    truncate -s 2G "$b/rank-00000.rsnap" "$b/rank-00001.ring" "$w/from/rank-00001.rsnap" || exit 1
    cp "$w/good/rank-00000.rsnap" "$w/from/" || exit 1
    for v in "summary $b/rank-00000.rsnap" "summary $b/rank-00001.ring" "replay $b/rank-00000.rsnap" \
        "export --torch $b/rank-00000.rsnap -o $w/x.pickle" "report $b/rank-00000.rsnap" "report $b"; do
        set -- $v
        r=$(peak "$ranksnap" "$@" 2> "$w/err"); cat "$w/err"; echo "ranksnap $v: $r KiB/status"
        test "${r#* }" -eq 1 || fail "ranksnap $v: exit status ${r#* }"
        test "${r% *}" -lt 65536 || fail "ranksnap $v: ${r% *} KiB"
        grep -q "$b/rank-0000[01]\.\(rsnap\|ring\): not a ranksnap" "$w/err" || fail "ranksnap $v: not named"
    done
    r=$(peak timeout 120 $mpiexec -np 2 --oversubscribe --allow-run-as-root --mca btl self,vader \
        "$ranksnap" collect --from "$w/from" --to "$w/to" 2> "$w/err"); cat "$w/err"; echo "collect: $r"
    test "${r% *}" -lt 262144 || fail "collect: ${r% *} KiB"
    grep -q "rank-00001.rsnap: not a ranksnap snapshot (the top level is a msgpack integer, expected a map); not collected" "$w/err" ||
        fail "collect: the file of zeros not named"
    test -e "$w/to/rank-00000.rsnap" && test ! -e "$w/to/rank-00001.rsnap" || fail "collect: what was collected"
}

# --html F, --out DIR's report.html and export -o F, where F is a FIFO or a character device: an
# error naming F, exit status 1, and F still what it was. The device is made here (mknod, as
# root) with /dev/null's numbers: never /dev/null itself, which a regression would replace.
case_output_to_a_fifo_or_device_is_refused_and_left_alone() {
    good
    mkfifo "$w/page.html" "$w/out.pickle" || exit 1
    targets="$w/page.html"
    if mknod "$w/null" c 1 3 2>/dev/null; then targets="$targets $w/null"; else echo "(no mknod here)"; fi
    for f in $targets; do
        timeout 20 "$ranksnap" report "$w/good" --html "$f" > /dev/null 2> "$w/err"; rc=$?; cat "$w/err"
        test $rc -eq 1 && grep -q "$f: is a .*; refusing to replace it" "$w/err" || fail "--html $f: $rc"
        test -p "$f" || test -c "$f" || fail "$f was replaced"
    done
    timeout 20 "$ranksnap" export --torch "$w/good/rank-00000.rsnap" -o "$w/out.pickle" 2> "$w/err"; rc=$?
    cat "$w/err"
    test $rc -eq 1 && grep -q "out.pickle: is a FIFO; refusing to replace it" "$w/err" || fail "export -o: $rc"
    test -p "$w/out.pickle" || fail "the export's FIFO was replaced"
    mkdir "$w/rep" && mkfifo "$w/rep/report.html" || exit 1
    timeout 20 "$ranksnap" report "$w/good" --out "$w/rep" > /dev/null 2> "$w/err"; rc=$?; cat "$w/err"
    test $rc -eq 1 && test -p "$w/rep/report.html" || fail "--out with a FIFO report.html: $rc"
}

command -v "case_$name" >/dev/null || { echo "hostile_paths.sh: no case '$name'" >&2; exit 2; }
shift
"case_$name" "$@"
