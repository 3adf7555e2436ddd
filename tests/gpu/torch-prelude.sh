# torch-prelude.sh — sourced by the two-GPU PyTorch scripts (torch-launchers.sh, torch-names.sh)
# from the repository root: what the machine must have, and ranksnap built for the job.
#   require_and_build DIR NEED...   each NEED a shell test ("command -v torchrun"); a missing one
#                                   is written to DIR/summary.txt and ends the script (status 1);
#                                   then the library, the reader and the CLI into build/
require_and_build() {
    dir=$1; shift
    for need in "$@" "python3 -c 'import torch; assert torch.cuda.device_count() >= 2'"; do
        sh -c "$need" > /dev/null 2>&1 || { echo "missing on this machine: $need" | tee "$dir/summary.txt"; exit 1; }
    done
    cmake -S . -B build -DRANKSNAP_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$dir/build.log" 2>&1 &&
      cmake --build build -j16 --target ranksnap ranksnap_reader ranksnap_cli >> "$dir/build.log" 2>&1 ||
      { tail -30 "$dir/build.log"; exit 1; }
}
