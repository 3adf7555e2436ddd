#!/bin/sh
# ranksnap-run and Python programs: what it sets for a Python program (however it is named or
# started) and not for others, and sitecustomize.py's chaining and import hook. Skips (77)
# without python3.
# usage: torch_launcher.sh CASE RANKSNAP_RUN LIB PYTHON TESTS_PYTHON_DIR WORK
set -u
name=$1 run=$2 lib=$3 py=$4 src=$5 work=$6
command -v "$py" >/dev/null || exit 77
run=$(cd "$(dirname "$run")" && pwd)/$(basename "$run")
dir=$work/$name
rm -rf "$dir" && mkdir -p "$dir"
unset RANKSNAP_RECORDER
export PYTHONPATH="$src/fake_torch"
pydir=$(cd "$(dirname "$run")/../python" && pwd)

# what the program sees: recorder, the first PYTHONPATH entry, and whether LD_PRELOAD has the lib
show='import os; print(os.environ.get("RANKSNAP_RECORDER", "unset"), os.environ.get("PYTHONPATH", "").split(":")[0], "libranksnap" in os.environ.get("LD_PRELOAD", ""))'

expect() {
    test "$1" = "$2" || { echo "got '$1', expected '$2'"; exit 1; }
}

case_launcher_sets_up_python_by_its_name() {
    expect "$("$run" --lib "$lib" "$py" -c "$show")" "torch $pydir True"
}

case_launcher_sets_up_a_script_whose_shebang_runs_python() {
    printf '#!/usr/bin/env %s\n%s\n' "$(basename "$py")" "$show" > "$dir/train"
    chmod +x "$dir/train"
    expect "$(PATH="$(dirname "$py"):$PATH" "$run" --lib "$lib" "$dir/train")" "torch $pydir True"
}

case_launcher_sets_up_python_dash_m() {
    printf '%s\n' "$show" > "$dir/entry.py"
    expect "$(cd "$dir" && "$run" --lib "$lib" "$py" -m entry)" "torch $pydir True"
}

case_launcher_leaves_other_programs_alone() {
    printf '#!/bin/sh\necho "${RANKSNAP_RECORDER-unset} ${PYTHONPATH-unset}"\n' > "$dir/prog"
    chmod +x "$dir/prog"
    expect "$(PYTHONPATH= "$run" --lib "$lib" "$dir/prog")" "unset "
    expect "$("$run" --lib "$lib" sh -c 'echo "${RANKSNAP_RECORDER-unset}"')" "unset"
}

case_launcher_torch_allocator_ranksnap_selects_the_pluggable_route() {
    expect "$("$run" --lib "$lib" --torch-allocator ranksnap "$py" -c "$show")" "ranksnap $pydir True"
    expect "$("$run" --lib "$lib" --torch-allocator=torch "$py" -c "$show")" "torch $pydir True"
}

case_launcher_keeps_a_recorder_given_in_the_environment() {
    expect "$(RANKSNAP_RECORDER=ranksnap "$run" --lib "$lib" "$py" -c "$show")" "ranksnap $pydir True"
}

# installed under /usr by Debian's rules, the library is in the machine's multiarch folder: on
# aarch64 lib/aarch64-linux-gnu (uname answered by a stand-in), on x86-64 lib/x86_64-linux-gnu
case_launcher_finds_the_library_in_the_machines_multiarch_folder() {
    for m in aarch64 x86_64; do
        prefix=$dir/$m/usr
        mkdir -p "$prefix/bin" "$prefix/lib/$m-linux-gnu" "$dir/$m/uname"
        cp "$run" "$prefix/bin/ranksnap-run"
        cp "$lib" "$prefix/lib/$m-linux-gnu/libranksnap.so"
        printf '#!/bin/sh\n[ "$1" = -m ] && echo %s || exec /bin/uname "$@"\n' "$m" > "$dir/$m/uname/uname"
        chmod +x "$dir/$m/uname/uname"
        expect "$(PATH="$dir/$m/uname:$PATH" "$prefix/bin/ranksnap-run" sh -c 'echo "$LD_PRELOAD"')" \
            "$prefix/bin/../lib/$m-linux-gnu/libranksnap.so"
    done
    # another machine's folder is not this one's
    out=$(PATH="$dir/x86_64/uname:$PATH" "$dir/aarch64/usr/bin/ranksnap-run" true 2>&1); rc=$?
    test $rc -eq 2 || { echo "$out"; exit 1; }
    case "$out" in *"cannot find libranksnap.so"*) ;; *) echo "$out"; exit 1 ;; esac
}

case_launcher_refuses_an_unknown_torch_allocator() {
    out=$("$run" --lib "$lib" --torch-allocator cuda "$py" -c 'print(1)' 2>&1); rc=$?
    echo "$out"
    test $rc -eq 2 || exit 1
    case "$out" in *"--torch-allocator cuda: expected torch"*) ;; *) exit 1 ;; esac
}

# the glue is there once torch is imported, and only then
probe='import sys; import ranksnap._torch as t; a = t.current() is None; import torch; print(a, t.current() is not None and t.current().mode)'

case_sitecustomize_installs_the_glue_when_torch_is_imported() {
    expect "$(RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir/out" "$run" --lib "$lib" "$py" -c "$probe")" "True torch"
}

case_sitecustomize_does_nothing_without_the_recorder_variable() {
    # a PYTHONPATH left in a shell: the folder without ranksnap-run's RANKSNAP_RECORDER
    expect "$(PYTHONPATH="$pydir:$src/fake_torch" "$py" -c "$probe")" "True False"
}

case_sitecustomize_chains_to_the_sites_own() {
    mkdir -p "$dir/site"
    printf 'import builtins\nbuiltins.SITE_CUSTOMIZED = "yes"\n' > "$dir/site/sitecustomize.py"
    out=$(PYTHONPATH="$src/fake_torch:$dir/site" RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir/out" \
        "$run" --lib "$lib" "$py" -c 'import builtins; print(getattr(builtins, "SITE_CUSTOMIZED", "no"))
import torch, ranksnap._torch as t; print(t.current().mode)')
    expect "$(echo $out)" "yes torch"
}

# a torch that fails to import: the script's traceback is the import's, with no frame of the
# glue's import hook in it
case_sitecustomize_leaves_no_frame_when_the_import_of_torch_fails() {
    mkdir -p "$dir/broken/torch"
    printf 'raise ImportError("libtorch_cuda.so: cannot open shared object file")\n' > "$dir/broken/torch/__init__.py"
    out=$(PYTHONPATH="$dir/broken" RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir/out" \
        "$run" --lib "$lib" "$py" -c 'import torch' 2>&1); rc=$?
    echo "$out"
    test $rc -eq 1 || { echo "exit status $rc, expected 1"; exit 1; }
    case "$out" in *"ImportError: libtorch_cuda.so"*) ;; *) echo "not the import's error"; exit 1 ;; esac
    case "$out" in *"$pydir"*) echo "a frame of the glue in the traceback"; exit 1 ;; esac
}

"case_$name"
