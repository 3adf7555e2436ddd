#!/bin/sh
# ranksnap's PyTorch glue in one process started by ranksnap-run, on the stand-in torch
# (tests/python/fake_torch): the in-process cases of tests/python/glue_cases.py, and the fatal
# signal cases, which need this script to watch the process. Skips (77) without python3.
# usage: torch_glue.sh CASE RANKSNAP_RUN LIB PYTHON TESTS_PYTHON_DIR WORK
set -u
name=$1 run=$2 lib=$3 py=$4 src=$5 work=$6
command -v "$py" >/dev/null || exit 77
dir=$work/$name
rm -rf "$dir" && mkdir -p "$work"
export RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir" PYTHONPATH="$src/fake_torch" RANKSNAP_REPORT=0
# the range 2:4 (steps counted from optimizer steps, or ranksnap.step)
glue() { "$run" --lib "$lib" --steps 2:4 "$py" "$src/glue_cases.py" "$@"; }

# The signal cases: the child records, then waits for SIGTERM either in a sleep (the GIL
# released, as a rank blocked in a collective) or in a Python loop (the GIL held). The driver
# signals once the child is there: for the loop, the child says so from inside it (the file
# ready); for the sleep, ready comes just before it, and the kernel says when the main thread is
# in the sleep's system call (its wchan, or its state where wchan is hidden).
in_sleep() {
    w=$(cat "/proc/$1/wchan" 2>/dev/null)
    case "$w" in
        *sleep*|*select*|*poll*) return 0 ;;
        ''|0) [ "$(cut -d ')' -f 2 "/proc/$1/stat" 2>/dev/null | cut -d ' ' -f 2)" = S ] ;;
        *) return 1 ;;
    esac
}
start_child() {
    # not through glue(): a function would run in a subshell, whose pid is not python's
    "$run" --lib "$lib" --steps 2:4 "$py" "$src/glue_cases.py" sigterm_child "$1" > "$work/$name.out" 2>&1 &
    child=$!
    i=0
    until [ -e "$dir/ready" ] && { [ "$1" != sleep ] || in_sleep $child; }; do
        i=$((i + 1)); [ $i -lt 600 ] || { echo "the child never got ready"; cat "$work/$name.out"; kill -9 $child; exit 1; }
        sleep 0.1 # polling the condition above, for at most a minute
    done
}

reason_of() {
    "$py" -c 'import pickle, sys; print(pickle.load(open(sys.argv[1], "rb"))["ranksnap"]["reason"])' "$1"
}

case_glue_sigterm_while_blocked_writes_the_pickle() {
    # the dump is what is checked, not its bound: the default 800 ms passed before it was made
    # on a loaded machine
    export RANKSNAP_DUMP_TIMEOUT_MS=60000
    start_child sleep
    kill -TERM $child
    wait $child; rc=$?
    cat "$work/$name.out"
    # killed by SIGTERM as without ranksnap (the shell says 128 + 15)
    test $rc -eq 143 || { echo "exit status $rc, expected 143"; exit 1; }
    test -f "$dir/rank-00000.pickle" || { echo "no pickle after SIGTERM"; ls -la "$dir"; exit 1; }
    r=$(reason_of "$dir/rank-00000.pickle"); test "$r" = signal || { echo "reason $r"; exit 1; }
}

# A handler on the thread that holds the GIL cannot wait for a dump that needs it: with a
# ten-minute dump timeout the process would hang here without the gate; it dies at once, as
# without ranksnap, leaving no signal dump.
case_glue_sigterm_while_holding_the_gil_dies_without_waiting() {
    export RANKSNAP_DUMP_TIMEOUT_MS=600000
    start_child spin
    kill -TERM $child
    wait $child; rc=$?
    cat "$work/$name.out"
    test $rc -eq 143 || { echo "exit status $rc, expected 143"; exit 1; }
    test ! -f "$dir/rank-00000.pickle" || { echo "a dump was written while the GIL was held?"; exit 1; }
}

# A model trained by hand, no torch.optim, --steps 2:4: no step can be told. Rank 0 says so as
# the job ends, with what it saw and what a Python user can do, not a C function or a setting of
# collectives.
case_glue_no_step_found_says_what_to_do_in_python() {
    glue glue_train_without_an_optimizer > "$work/$name.out" 2>&1; rc=$?
    cat "$work/$name.out"
    test $rc -eq 0 || exit 1
    for want in "never reached" "in Python, call ranksnap.step(n) at the start of iteration n" \
        "no optimizer stepped, and Net was followed by a backward pass at each call"; do
        grep -qF "$want" "$work/$name.out" || { echo "not said: $want"; exit 1; }
    done
    ! grep -q "RANKSNAP_STEP_ON\|ranksnap_step(" "$work/$name.out" || { echo "a hint for C programs"; exit 1; }
}

case_glue_oom_observer_never_raises_in_place_of_the_error() {
    # RANKSNAP_DIR a plain file: the dump fails inside the observer
    : > "$dir"
    glue glue_oom_observer_never_raises_in_place_of_the_error; rc=$?
    rm -f "$dir"
    exit $rc
}

# A bad RANKSNAP_* value never takes a PyTorch job down: the script runs as without ranksnap
# (the recorder case passes: nothing records), and the error is said once, by the library, naming
# the variable, for the library's options and for the glue's own (RANKSNAP_RECORDER).
case_glue_bad_option_value_is_said_once_and_the_script_runs() {
    for bad in RANKSNAP_RECORDER=pytorch RANKSNAP_STACKS=dwarf RANKSNAP_MAX_ENTRIES=0; do
        var=${bad%%=*}
        env "$bad" "$run" --lib "$lib" --steps 2:4 "$py" "$src/glue_cases.py" glue_bad_option_runs_unrecorded \
            > "$work/$name.out" 2> "$work/$name.err"
        rc=$?
        cat "$work/$name.out" "$work/$name.err"
        test $rc -eq 0 || { echo "$bad: exit status $rc"; exit 1; }
        test "$(wc -l < "$work/$name.err")" -eq 1 && test "$(grep -c "$var" "$work/$name.err")" -eq 1 ||
            { echo "$bad: not said once, naming $var"; exit 1; }
    done
}

# libranksnap.so installed without libranksnap_reader.so: the range's pickle is still written,
# the script ends as without ranksnap, and the live report is skipped with one line that names
# the missing library and the folder to give `ranksnap report` (no report made of empty data).
case_glue_without_the_reader_library_writes_the_pickle_and_says_where() {
    lone=$work/$name.lib
    rm -rf "$lone" && mkdir -p "$lone" && cp "$lib" "$lone/libranksnap.so" || exit 1
    RANKSNAP_REPORT=1 "$run" --lib "$lone/libranksnap.so" --steps 2:4 "$py" \
        "$src/train_fake.py" --steps 6 > "$work/$name.out" 2> "$work/$name.err"
    rc=$?
    cat "$work/$name.out" "$work/$name.err"
    test $rc -eq 0 || { echo "exit status $rc"; exit 1; }
    test -f "$dir/rank-00000.pickle" || { echo "no pickle"; ls -la "$dir"; exit 1; }
    test ! -e "$dir/report.json" || { echo "a report made without the reader"; exit 1; }
    grep -q "no live report for this range (cannot load libranksnap_reader.so.*ranksnap report $dir" "$work/$name.err" ||
        { echo "the missing reader library is not said"; exit 1; }
}

# two ranges: PyTorch's recorder runs twice, and each range's end writes the rank's pickle, the
# second in place of the first (as a .rsnap is): the file holds the last range's steps
case_glue_records_every_range_of_the_schedule() {
    "$run" --lib "$lib" --steps 2:4,6:8 "$py" "$src/glue_cases.py" "$name" || exit 1
    test -f "$dir/rank-00000.pickle" || { echo "no pickle"; ls -la "$dir"; exit 1; }
    steps=$("$py" -c 'import pickle, sys; print([s[0] for s in pickle.load(open(sys.argv[1], "rb"))["ranksnap"]["steps"]])' "$dir/rank-00000.pickle")
    test "$steps" = "[6, 7]" || { echo "the pickle's steps: $steps, expected [6, 7] (the last range)"; exit 1; }
}

case_glue_names_the_backward_by_the_models_layers_on_the_fast_path() {
    "$run" --lib "$lib" --steps 2:4,6:8 "$py" "$src/glue_cases.py" "$name"
}

case_glue_says_once_which_names_are_off_when_torch_lacks_a_private_call() {
    "$run" --lib "$lib" --steps 2:4,6:8 "$py" "$src/glue_cases.py" "$name"
}

# Started as one of two without its rank (Lightning's second process): glue_cases.py checks that
# init_process_group gives the rank before any step.
case_glue_identity_is_taken_when_the_process_group_is_made() {
    env LOCAL_RANK=1 WORLD_SIZE=2 "$run" --lib "$lib" --steps 2:4 "$py" "$src/glue_cases.py" "$name"
}

case_glue_pluggable_route_swaps_the_allocator_before_cuda() {
    "$run" --lib "$lib" --torch-allocator ranksnap "$py" "$src/glue_cases.py" "$name"
}

if command -v "case_$name" >/dev/null 2>&1 || type "case_$name" >/dev/null 2>&1; then
    "case_$name"
else
    glue "$name"
fi
