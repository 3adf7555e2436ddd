#!/bin/sh
# Installs what building and testing ranksnap needs, from Debian/Ubuntu packages, and finds
# what packages do not always provide: the CUDA toolkit (headers and runtime: the fake-driver
# and fake-runtime tests of tests/gpu run the driver layer without a GPU) and a Python 3.12 or
# later (the exit paths only sys.monitoring shows). Idempotent; uses sudo when not run as root.
# Without either, the build and the rest of the suite still run, and the tests that need it say
# so; in CI (CI=true) a missing one is an error here, before anything is built.
set -eu
# chromium: the browser tests of report.html (label html; tests/html), headless
# nodejs, node-css-tree: the checks of the page's script (node --check) and style sheet (CSSTree)
# mpich, libmpich-dev: MPICH's plugin and the MPI tests run once under MPICH's mpiexec; Open MPI
#   stays the system's default MPI (mpicc, mpirun: Debian's alternatives rank it first)
# python3-build, python3-venv, patchelf: the wheel, built offline and installed in a fresh venv
#   (tests/package/wheel.sh); patchelf gives the libraries it bundles RUNPATH $ORIGIN
# gcc/g++-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user-static: the aarch64 cross build and
# its tests under qemu (the static build: tests/emulated.sh registers it with binfmt_misc)
# slurmctld, slurmd, slurm-client: the jobs of label slurm, each started on a Slurm of its own
# (tests/cli/slurm_jobs.sh: its own configuration, ports and folders); the packages' services
# need /etc/slurm/slurm.conf to start and are left as the packages leave them
pkgs="cmake make gcc g++ clang pkg-config libopenmpi-dev openmpi-bin mpich libmpich-dev libmsgpack-dev libunwind-dev python3 python3-msgpack python3-build python3-venv patchelf chromium nodejs node-css-tree gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static slurmctld slurmd slurm-client"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup-deps: installing$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
# a package of this name that apt can install, else nothing
installable() {
    apt-cache policy "$1" 2>/dev/null | grep -q "Candidate: [0-9]"
}
lacking=""
lack() {
    echo "setup-deps: $1" >&2
    lacking="$lacking
  - $1"
}

# the CUDA toolkit: where CMake's FindCUDAToolkit looks (nvcc on PATH, CUDAToolkit_ROOT,
# CUDA_PATH, /usr/local/cuda), else Debian's or Ubuntu's package where apt has it
cuda=""
for d in "${CUDAToolkit_ROOT:-}" "${CUDA_PATH:-}" /usr/local/cuda \
    "$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /none/bin/nvcc)")")"; do
  [ -n "$d" ] && [ -f "$d/include/cuda_runtime_api.h" ] && { cuda=$d; break; }
done
if [ -z "$cuda" ] && installable nvidia-cuda-toolkit; then
  echo "setup-deps: installing nvidia-cuda-toolkit"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nvidia-cuda-toolkit
  [ -f /usr/include/cuda_runtime_api.h ] && cuda=/usr
fi
if [ -n "$cuda" ]; then
  echo "setup-deps: CUDA toolkit in $cuda"
else
  lack "no CUDA toolkit (cuda_runtime_api.h) in CUDAToolkit_ROOT, CUDA_PATH, /usr/local/cuda or beside nvcc, and apt has none to install: install NVIDIA's (https://developer.nvidia.com/cuda-downloads) or point CUDAToolkit_ROOT at one; without it the fake-driver and fake-runtime tests are not built"
fi

# Python 3.12 or later: python3.N on PATH (pyenv's shims fail for a version that is not
# selected: each is asked), pyenv's own versions, else the distribution's python3.12/3.13
py312=""
for p in python3.14 python3.13 python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3; do
  command -v "$p" >/dev/null 2>&1 || [ -x "$p" ] || continue
  "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { py312=$p; break; }
done
if [ -z "$py312" ]; then
  for p in python3.13 python3.12; do
    installable "$p" || continue
    echo "setup-deps: installing $p"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$p"
    py312=$p
    break
  done
fi
if [ -n "$py312" ]; then
  echo "setup-deps: Python 3.12+ is $py312"
else
  lack "no Python 3.12 or later on PATH or in pyenv, and apt has none to install: the exit-path cases *_python_3_12 cannot run"
fi

# The libraries the aarch64 cross build links, built for arm64: Debian's own packages, installed
# beside their amd64 twins (multiarch; each is Multi-Arch: same, so apt may have to bring the
# amd64 one to the same version, and is told to remove nothing). Debian's archive carries every
# architecture; elsewhere (Ubuntu's arm64 packages are on another mirror) this is left to the
# machine's owner.
arm64_pkgs="libmsgpack-dev:arm64 libunwind-dev:arm64"
arm64_missing=""
for p in $arm64_pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || arm64_missing="$arm64_missing $p"
done
if [ -n "$arm64_missing" ]; then
  os=$(. /etc/os-release 2>/dev/null && echo "${ID:-}")
  if [ "$os" = debian ]; then
    echo "setup-deps: installing$arm64_missing (dpkg architecture arm64)"
    dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends --no-remove $arm64_missing ||
      lack "apt could not install$arm64_missing beside the amd64 packages: the aarch64 cross build cannot link"
  else
    lack "no$arm64_missing: on Debian this script installs them (dpkg --add-architecture arm64); here, add the arm64 packages of msgpack-c and libunwind another way: the aarch64 cross build cannot link"
  fi
fi
# Running the cross build's tests: the kernel hands aarch64 programs to qemu, through a
# binfmt_misc of the tests' own (tests/emulated.sh)
if command -v qemu-aarch64-static >/dev/null 2>&1; then
  why=$(sh "$(dirname "$0")/emulated.sh" true 2>&1) || lack "aarch64 programs cannot be run here: $why"
fi

if [ -n "$lacking" ]; then
  if [ "${CI:-}" = true ]; then
    echo "setup-deps: CI=true, and the suite would leave out what needs:$lacking" >&2
    exit 1
  fi
  echo "setup-deps: ok, but the tests that need these will be skipped, each saying why:$lacking"
  exit 0
fi
echo "setup-deps: ok"
