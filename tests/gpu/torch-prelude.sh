# torch-prelude.sh — sourced by the two-GPU PyTorch scripts (torch-launchers.sh, torch-names.sh)
# from the repository root: what the machine must have, and ranksnap built for the job.
#   require_and_build DIR NEED...   each NEED a shell test ("command -v torchrun"); a missing one
#                                   is written to DIR/summary.txt and ends the script (status 1);
#                                   then the library, the reader and the CLI into build/
# RS_GPUS: the GPUs the script needs (2 unless it says otherwise).
require_and_build() {
    dir=$1; shift
    for need in "$@" "python3 -c 'import torch; assert torch.cuda.device_count() >= ${RS_GPUS:-2}'"; do
        sh -c "$need" > /dev/null 2>&1 || { echo "missing on this machine: $need" | tee "$dir/summary.txt"; exit 1; }
    done
    cmake -S . -B build -DRANKSNAP_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$dir/build.log" 2>&1 &&
      cmake --build build -j16 --target ranksnap ranksnap_reader ranksnap_cli >> "$dir/build.log" 2>&1 ||
      { tail -30 "$dir/build.log"; exit 1; }
}

# torchrun_job DIR N STEPS SCRIPT ARGS...: an unmodified job of N ranks under
#   torchrun --standalone --nproc-per-node N --no-python launch/ranksnap-run --steps STEPS --dir DIR
# bounded by what is left of the caller's budget (its `left`), at most JOB_LIMIT seconds (120):
# its command and exit status in DIR.cmd, what it printed in DIR.stdout and DIR.stderr. Status 1,
# with nothing run, when fewer than 30 seconds are left.
torchrun_job() {
    d=$1 n=$2 steps=$3; shift 3
    rm -rf "$d" && mkdir -p "$d"
    limit=$(left); [ "$limit" -gt "${JOB_LIMIT:-120}" ] && limit=${JOB_LIMIT:-120}
    [ "$limit" -ge 30 ] || return 1
    echo "+ torchrun --standalone --nproc-per-node $n --no-python launch/ranksnap-run --steps $steps --dir $d python3 $*" | tee "$d.cmd"
    start=$SECONDS
    timeout -k 5 "$limit" torchrun --standalone --nproc-per-node "$n" --no-python \
        launch/ranksnap-run --steps "$steps" --dir "$d" python3 "$@" > "$d.stdout" 2> "$d.stderr"
    echo "exit status $? after $((SECONDS - start)) s" | tee -a "$d.cmd"
}
