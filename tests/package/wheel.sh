#!/bin/sh
# wheel.sh SOURCE_DIR BUILD_DIR WORK PYTHON [MPIEXEC] — ranksnap as a PyTorch user installs it: the
# wheel built from the checkout (python3 -m build --wheel, offline: the backend needs nothing but
# Python and CMake), installed with pip into a fresh virtual environment, then:
#   1. with no MPI on the machine: `ranksnap-run --steps 2:6 torchrun --nproc-per-node 2
#      train.py`, the stand-ins of tests/python (torch, torchrun, a DDP script), from the venv's
#      PATH: one pickle per rank, and the report flags the rank with the longer batch. "No MPI":
#      a mount namespace (unshare -m) in which every MPI library file of the machine reads empty,
#      where the namespace may be made; in any case nothing the wheel ships may need MPI;
#   2. with Open MPI, when MPIEXEC is given: `mpirun -np 4 ranksnap-run --steps 2:6 ranksnap-demo
#      --diverge 2:1.5` from the venv, the demo's copy told nothing of the build tree's libraries
#      (patchelf), so that the wheel's library and plugin serve it: rank 2 flagged;
#   3. `pip uninstall` leaves no file of ranksnap in the venv.
# Skips (77) saying why without python3's venv or build modules (an error under CI=true:
# cli/missing_prerequisite.sh).
set -u
src=$1 build=$2 work=$3 py=$4 mpiexec=${5:-}
missing() { exec sh "$src/tests/cli/missing_prerequisite.sh" "$1" "the wheel was not built nor tried"; }
"$py" -c 'import venv, ensurepip' 2>/dev/null || missing "$py has no venv/ensurepip (python3-venv)"
"$py" -c 'import build' 2>/dev/null || missing "$py has no build module (python3-build)"
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1

# ---- built, offline, and what it holds --------------------------------------------------------
# (from WORK: `python3 -m build` in a folder holding a build/ folder would import that)
(cd "$work" && "$py" -m build --wheel --outdir "$work/dist" --config-setting=build-dir="$work/cmake" \
    "$src") > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; fail "the wheel did not build"; }
whl=$(ls "$work"/dist/ranksnap-*.whl) || fail "no wheel in $work/dist"
echo "built $(basename "$whl")"
case "$(basename "$whl")" in
  ranksnap-*-py3-none-manylinux_2_[0-9]*_"$(uname -m)".whl) ;;
  *) fail "tag of $(basename "$whl"): expected py3-none-manylinux_2_N_$(uname -m)" ;;
esac
"$py" - "$whl" <<'PY' || fail "the wheel's contents"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
want = {"ranksnap/__init__.py", "ranksnap/_entry.py", "ranksnap/_boot/sitecustomize.py",
        "ranksnap/bin/ranksnap", "ranksnap/bin/ranksnap-run", "ranksnap/lib/libranksnap.so",
        "ranksnap/lib/libranksnap_reader.so", "ranksnap/lib/libranksnap-mpi-openmpi.so"}
lack = sorted(want - names)
print("missing:", lack) if lack else None
sys.exit(1 if lack or "sitecustomize.py" in names else 0)
PY

# ---- installed into a fresh venv, with nothing from an index -----------------------------------
venv=$work/venv
"$py" -m venv "$venv" || fail "python3 -m venv"
"$venv/bin/pip" install --no-index --no-deps -q "$whl" || fail "pip install $whl"
for p in ranksnap ranksnap-run; do test -x "$venv/bin/$p" || fail "$p is not on the venv's PATH"; done
"$venv/bin/ranksnap" --version | grep -q "^ranksnap " || fail "ranksnap --version"
mkdir -p "$work/unpacked" && (cd "$work/unpacked" && "$py" -m zipfile -e "$whl" .) || exit 1
for so in "$work"/unpacked/ranksnap/lib/*.so* "$work"/unpacked/ranksnap/bin/ranksnap; do
  if readelf -d "$so" | grep -E 'NEEDED.*\[lib(mpi|mpich)[._]'; then fail "$so needs an MPI library"; fi
done

# Runs "$@" where MPI's library files read empty: in a mount namespace, or as it is where none
# can be made, saying so.
without_mpi() {
  files=$(ls /usr/lib/*/libmpi.so.* /usr/lib/*/libmpich.so.* /usr/lib64/libmpi.so.* \
            /usr/lib64/libmpich.so.* 2>/dev/null)
  if unshare -m true 2>/dev/null; then
    unshare -m sh -c 'for f in $0; do mount --bind /dev/null "$f" || exit 97; done; exec "$@"' \
      "$files" "$@"
  else
    echo "(unshare -m is not allowed here: MPI's libraries left in place)"
    "$@"
  fi
}

# ---- 1. torchrun, no MPI ------------------------------------------------------------------------
bin=$work/bin && mkdir -p "$bin"
# torchrun as pip installs it: a Python script of the venv, here running the stand-in agent
printf '#!%s\nimport runpy, sys\nsys.argv[0] = "torchrun"\nrunpy.run_path("%s", run_name="__main__")\n' \
  "$venv/bin/python" "$src/tests/python/torchrun_fake.py" > "$bin/torchrun" && chmod +x "$bin/torchrun"
dir=$work/torch && mkdir -p "$dir" "$dir.tmp"
(
  export PATH="$venv/bin:$bin:$PATH" PYTHONPATH="$src/tests/python/fake_torch" TMPDIR="$dir.tmp" \
    RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir" RANKSNAP_GATHER_TIMEOUT=30 RANKSNAP_DIVERGENCE=
  unset OMPI_COMM_WORLD_SIZE PMI_SIZE PMIX_SIZE
  without_mpi ranksnap-run --steps 2:6 torchrun --nproc-per-node 2 "$src/tests/python/train_fake.py" \
    --diverge 1:1.5 --dist env --sync
) > "$work/torch.out" 2>&1 || { cat "$work/torch.out"; fail "the torchrun job"; }
cat "$work/torch.out"
test "$(cd "$dir" && ls rank-* | tr '\n' ' ')" = "rank-00000.pickle rank-00001.pickle " ||
  { ls "$dir"; fail "one pickle per rank"; }
"$py" -c 'import json, sys; r = json.load(open(sys.argv[1]));
sys.exit(0 if [d["rank"] for d in r["divergent_ranks"]] == [1] and len(r["ranks"]) == 2 else 1)' \
  "$dir/report.json" || { cat "$dir/report.txt"; fail "the report of the torchrun job"; }
grep -E "without MPI|MPI plugin|libmpi" "$work/torch.out" && fail "the torchrun job looked for MPI"
echo "torchrun job: ok"

# ---- 2. mpirun, Open MPI ------------------------------------------------------------------------
if [ -n "$mpiexec" ]; then
  dir=$work/mpi && mkdir -p "$dir"
  demo=$work/ranksnap-demo
  cp "$build/tests/workloads/ranksnap-demo" "$demo" || exit 1
  rpath=$(patchelf --print-rpath "$demo" | tr ':' '\n' | grep -vx "$build" | paste -sd: -)
  patchelf --set-rpath "$rpath" "$demo" || fail "patchelf on the demo's copy"
  ldd "$demo" | grep -q "libranksnap.so.0 => not found" || fail "the demo's copy still finds $build"
  RANKSNAP_BACKEND=sim RANKSNAP_DIR="$dir" OMPI_MCA_rmaps_base_oversubscribe=1 \
    "$mpiexec" -np 4 --oversubscribe --allow-run-as-root --mca btl self,vader \
      -x RANKSNAP_BACKEND -x RANKSNAP_DIR "$venv/bin/ranksnap-run" --steps 2:6 "$demo" --iters 8 \
      --diverge 2:1.5 > "$work/mpi.out" 2>&1 || { cat "$work/mpi.out"; fail "the mpirun job"; }
  cat "$work/mpi.out"
  "$py" -c 'import json, sys; r = json.load(open(sys.argv[1]));
sys.exit(0 if [d["rank"] for d in r["divergent_ranks"]] == [2] and len(r["ranks"]) == 4 else 1)' \
    "$dir/report.json" || fail "the report of the mpirun job"
  echo "mpirun job: ok"
fi

# ---- 3. uninstalled, nothing left ---------------------------------------------------------------
"$venv/bin/pip" uninstall -y -q ranksnap || fail "pip uninstall"
left=$(find "$venv" -iname '*ranksnap*')
[ -z "$left" ] || fail "left after pip uninstall: $left"
echo "uninstalled: nothing of ranksnap left in the venv"
