#!/bin/sh
# A typo in a RANKSNAP_* value never breaks the program: for every option of the table (ranksnap
# --help-env lists them; a row missing here fails the test), with a bad value, through both
# routes, the program exits 0 with the same output as without ranksnap, and the error is printed
# once, naming the variable. ranksnap then passes every call through (docs/POSTMORTEM.md).
#   API route: the demo (MPI_Init starts ranksnap; it allocates with ranksnap_malloc), compared
#     with a run under RANKSNAP_DISABLE=1 (the demo cannot run without ranksnap);
#   preload route: a plain CUDA program on the fake CUDA runtime with libranksnap.so preloaded,
#     compared with the same program preloaded with the fake runtime alone.
# usage: bad_options.sh DEMO RANKSNAP WORKDIR [PROGRAM LIBRANKSNAP FAKE_CUDART]
set -u
demo=$1 ranksnap=$2 w=$3
program=${4:-} lib=${5:-} fake=${6:-}
fail=0
rm -rf "$w" && mkdir -p "$w" || exit 1
for v in $(env | sed -n 's/^\(RANKSNAP_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
long() { printf "%$1s" "" | tr ' ' x; }

# One row per bad value: the variable that is wrong first, then what it needs beside it (PyTorch's
# variable too: RANKSNAP_ALLOC_CONF falls back to it, so its bad value must not stop the job). @N@
# stands for N x's.
rows=$(cat <<'EOF'
RANKSNAP_DISABLE=-1
RANKSNAP_BACKEND=gpu
RANKSNAP_MEMORY_LIMIT=lots
RANKSNAP_ALLOC_CONF=expandable_segments:maybe
PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:1
RANKSNAP_MAX_SPLIT_SIZE=1MiB
RANKSNAP_SIM_CAPACITY=0
RANKSNAP_MAX_ENTRIES=0
RANKSNAP_MAX_ENTRIES=1073741824 RANKSNAP_RING=memory
RANKSNAP_STACKS=dwarf
RANKSNAP_STACK_DEPTH=0
RANKSNAP_RECORD=maybe
RANKSNAP_DEBUG=0
RANKSNAP_DEBUG_SUBSYS=DISK
RANKSNAP_DIR=@5000@
RANKSNAP_JOB=@300@
RANKSNAP_STEPS=10-15
RANKSNAP_STEP_ON=MPI_Foo:1
RANKSNAP_STEP_ON=ncclAllgather:2
RANKSNAP_TRIGGER_STEPS=0
RANKSNAP_TRIGGER_LAG=0
RANKSNAP_GATHER=most
RANKSNAP_GATHER_TIMEOUT=0
RANKSNAP_WRITE=everyone
RANKSNAP_DIVERGENCE=-5%
RANKSNAP_REPORT=2
RANKSNAP_ON_OOM=abort
RANKSNAP_SIGNALS=2
RANKSNAP_DUMP_TIMEOUT_MS=0
RANKSNAP_MPI=2
RANKSNAP_MPI_PLUGIN=intelmpi
RANKSNAP_DRIVER=2
RANKSNAP_NVML=@600@
RANKSNAP_RING=disk
RANKSNAP_SITE_SKIP=@1100@
RANKSNAP_GROUPS=pp=0,dp=4
RANKSNAP_RECORDER=pytorch
EOF
)

# every option of the table has a row
for opt in $("$ranksnap" --help-env | sed -n 's/^  \(RANKSNAP_[A-Z_]*\) .*/\1/p'); do
    echo "$rows" | grep -q "^$opt=" || { echo "FAIL: no bad value for $opt in bad_options.sh"; fail=1; }
done

# run NAME ENV... -- COMMAND...: stdout to $w/NAME.out, stderr to $w/NAME.err, status in $w/NAME.rc
run() {
    n=$1
    shift
    env "$@" > "$w/$n.out" 2> "$w/$n.err"
    echo $? > "$w/$n.rc"
}

# check NAME BASE VAR: exit 0, NAME's output is BASE's, and VAR named in exactly one line of
# stderr, which holds nothing else
check() {
    n=$1 base=$2 var=$3
    rc=$(cat "$w/$n.rc")
    lines=$(wc -l < "$w/$n.err")
    named=$(grep -c "$var" "$w/$n.err")
    if [ "$rc" -ne 0 ] || ! cmp -s "$w/$n.out" "$w/$base.out" || [ "$named" -ne 1 ] || [ "$lines" -ne 1 ]; then
        echo "FAIL: $n: exit status $rc, output $(cmp -s "$w/$n.out" "$w/$base.out" && echo same || echo different), $var named in $named of $lines lines:"
        sed 's/^/    /' "$w/$n.err" "$w/$n.out" | cut -c1-300
        fail=1
    else
        echo "ok   $n: $(cut -c1-160 "$w/$n.err")"
    fi
}

run api-base RANKSNAP_BACKEND=sim RANKSNAP_DIR="$w/api-base" RANKSNAP_DISABLE=1 "$demo" --iters 3
test -n "$program" && run preload-base LD_PRELOAD="$fake" "$program"
i=0
echo "$rows" | while IFS= read -r row; do
    i=$((i + 1))
    set --
    for kv in $row; do
        case "$kv" in *@*@*)
            n=${kv#*@}; n=${n%@*}; kv="${kv%%@*}$(long "$n")";;
        esac
        set -- "$@" "$kv"
    done
    var=${1%%=*}
    run "api-$i" RANKSNAP_BACKEND=sim RANKSNAP_DIR="$w/api-$i" "$@" "$demo" --iters 3
    check "api-$i" api-base "$var"
    if [ -d "$w/api-$i" ] && [ -n "$(ls -A "$w/api-$i")" ]; then
        echo "FAIL: api-$i: files written while passing calls through: $(ls "$w/api-$i")"; fail=1
    fi
    if [ -n "$program" ]; then
        run "preload-$i" RANKSNAP_DIR="$w/preload-$i" LD_PRELOAD="$lib $fake" "$@" "$program"
        check "preload-$i" preload-base "$var"
    fi
    [ $fail -eq 0 ] || echo x >> "$w/failed"
done
test ! -e "$w/failed" && test $fail -eq 0
