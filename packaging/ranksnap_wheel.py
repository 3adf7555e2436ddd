"""ranksnap_wheel.py — the build backend (PEP 517) of ranksnap's wheel, named in pyproject.toml.

`pip wheel .`, `pip install .` or `python3 -m build --wheel` from a checkout: CMake builds what the
wheel ships and installs it into a staging folder, and this file packs that, with the PyTorch
glue, into one wheel — with Python's standard library only: pyproject.toml asks for no build
requirement, so nothing is downloaded, with build isolation or without.

The wheel is the package `ranksnap`:
    ranksnap/*.py                    the PyTorch glue (python/ranksnap/), and _entry.py, behind the
                                     `ranksnap` and `ranksnap-run` commands (entry points)
    ranksnap/_boot/sitecustomize.py  the folder ranksnap-run puts on PYTHONPATH (python/)
    ranksnap/bin/                    the `ranksnap` command and ranksnap-run
    ranksnap/lib/                    libranksnap.so, its pickle reader, the MPI plugins of the MPI
                                     families the build found (libranksnap-mpi-*.so), and the
                                     libraries they need that a system may lack (libunwind),
                                     bundled with RUNPATH $ORIGIN
ranksnap-collect, which links the build machine's MPI, is not in it. Every ELF file's needs are
checked: glibc's own libraries, or a file of the wheel. The platform tag is manylinux_2_N for
the newest GLIBC_2.N symbol version any of them asks for, the oldest glibc the wheel runs on.

Settings (pip: -C NAME=VALUE; python3 -m build: --config-setting NAME=VALUE):
    build-dir=DIR    the CMake build folder, kept afterwards (default: a temporary one)
    cmake-args=ARGS  more CMake arguments, e.g. "-DRANKSNAP_MPI=openmpi"
    jobs=N           parallel build jobs (default: the CPUs this process may use)
"""
import base64
import hashlib
import io
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "ranksnap"
SUMMARY = ("Which rank of a multi-GPU job used more memory, when, and from which line of code: "
           "MPI, NCCL and PyTorch jobs")
# what every Linux with glibc has: never bundled
SYSTEM = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
          "libresolv.so.2", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
# what the program or the job brings, and must: a wheel that carried its own would load a second
# MPI, CUDA runtime or NCCL beside the job's
NEVER = re.compile(r"lib(mpi|mpich|cuda|cudart|nccl)[._]")
ENTRY_POINTS = "[console_scripts]\nranksnap = ranksnap._entry:main\nranksnap-run = ranksnap._entry:run\n"
# one date for every file of the archives: the same sources give the same wheel
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def _say(msg):
    sys.stderr.write(f"ranksnap_wheel: {msg}\n")


def _run(args, **kw):
    _say("+ " + " ".join(shlex.quote(a) for a in args))
    return subprocess.run(args, check=True, **kw)


def _version():
    text = open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8").read()
    m = re.search(r"project\(\s*ranksnap\s+VERSION\s+([0-9][0-9.]*)", text)
    if not m:
        raise RuntimeError("CMakeLists.txt: no project(ranksnap VERSION ...)")
    return m.group(1)


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {SUMMARY}\n"
            "Requires-Python: >=3.8\nDescription-Content-Type: text/markdown\n\n"
            "`ranksnap-run --steps 10:15 torchrun --nproc-per-node 4 train.py` records steps 10 to "
            "14 on every rank and prints which rank used more GPU memory than the others, from "
            "which line of code, and which rank ran out of memory and why. Works on PyTorch jobs "
            "(torchrun, mpirun, accelerate, Lightning) and on C/CUDA programs under mpirun; needs "
            "no MPI where the job has none.\n")


# ---- ELF files: their needs, their glibc ---------------------------------------------------------

def _readelf(args, path):
    return subprocess.run(["readelf", "-W", *args, path], check=True, capture_output=True,
                          text=True).stdout


def _is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def _needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", _readelf(["-d"], path))


def _glibc(path):
    """The newest GLIBC_2.N the file asks for, as (2, N)."""
    found = [tuple(int(x) for x in v.split(".")) for v in
             re.findall(r"Name: GLIBC_([0-9]+\.[0-9]+)", _readelf(["-V"], path))]
    return max(found, default=(2, 17))


def _resolve(path):
    """The files the loader takes for `path`'s needs, by name (ldd)."""
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    return dict(re.findall(r"^\s*(\S+) => (/\S+)", out, re.M))


def _bundle(lib_dir, elves):
    """Copies into lib_dir what the files need beyond glibc and themselves, and what those need
    in turn; the copies find each other through RUNPATH $ORIGIN (patchelf)."""
    shipped = {os.path.basename(p) for p in elves}
    todo, bundled = list(elves), []
    while todo:
        path = todo.pop()
        where = None
        for name in _needed(path):
            if name in SYSTEM or name in shipped:
                continue
            if NEVER.match(name):
                raise RuntimeError(f"{path} needs {name}, which the job brings: it must only be "
                                   "opened at run time (the MPI plugins, the CUDA backend)")
            where = where or _resolve(path)
            if name not in where:
                raise RuntimeError(f"{path} needs {name}, which the loader does not find here")
            if os.path.dirname(path) != lib_dir:
                raise RuntimeError(f"{path} needs {name}: only the libraries may need a bundled one")
            copy = os.path.join(lib_dir, name)
            shutil.copyfile(where[name], copy)
            os.chmod(copy, 0o755)
            _say(f"bundled {where[name]} as lib/{name} (for {os.path.basename(path)})")
            shipped.add(name)
            bundled.append(copy)
            todo.append(copy)
    for copy in bundled:
        if any(n not in SYSTEM for n in _needed(copy)):
            if not shutil.which("patchelf"):
                raise RuntimeError(f"{os.path.basename(copy)} needs {_needed(copy)}: patchelf is "
                                   "needed to give it RUNPATH $ORIGIN (apt-get install patchelf)")
            _run(["patchelf", "--set-rpath", "$ORIGIN", copy])
    return bundled


# ---- the build ------------------------------------------------------------------------------------

def _stage(settings, stage):
    """CMake's build and install of the shipped programs into `stage`."""
    build = settings.get("build-dir") or tempfile.mkdtemp(prefix="ranksnap-wheel-build-")
    keep = bool(settings.get("build-dir"))
    jobs = str(settings.get("jobs") or len(os.sched_getaffinity(0)))
    try:
        _run(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
              "-DRANKSNAP_BUILD_TESTS=OFF", "-DCMAKE_INSTALL_LIBDIR=lib",
              "-DCMAKE_INSTALL_RPATH=$ORIGIN", *shlex.split(settings.get("cmake-args") or "")])
        _run(["cmake", "--build", build, "-j", jobs])
        _run(["cmake", "--install", build, "--prefix", stage, "--strip"])
    finally:
        if not keep:
            shutil.rmtree(build, ignore_errors=True)


def _layout(stage, pkg):
    """The package folder `pkg` from the staging folder and the source tree."""
    lib, bin_ = os.path.join(pkg, "lib"), os.path.join(pkg, "bin")
    os.makedirs(lib)
    os.makedirs(bin_)
    os.makedirs(os.path.join(pkg, "_boot"))
    src_lib = os.path.join(stage, "lib")
    shutil.copyfile(os.path.realpath(os.path.join(src_lib, "libranksnap.so")),
                    os.path.join(lib, "libranksnap.so"))
    names = ["libranksnap_reader.so"] + sorted(n for n in os.listdir(src_lib)
                                               if re.fullmatch(r"libranksnap-mpi-\w+\.so", n))
    for n in names:
        shutil.copyfile(os.path.join(src_lib, n), os.path.join(lib, n))
    for n in ("ranksnap", "ranksnap-run"):
        shutil.copyfile(os.path.join(stage, "bin", n), os.path.join(bin_, n))
    for d in (lib, bin_):
        for n in os.listdir(d):
            os.chmod(os.path.join(d, n), 0o755)
    glue = os.path.join(ROOT, "python", "ranksnap")
    for n in sorted(os.listdir(glue)):
        if n.endswith(".py"):
            shutil.copyfile(os.path.join(glue, n), os.path.join(pkg, n))
    shutil.copyfile(os.path.join(ROOT, "python", "sitecustomize.py"),
                    os.path.join(pkg, "_boot", "sitecustomize.py"))
    elves = [os.path.join(d, n) for d in (lib, bin_) for n in sorted(os.listdir(d))
             if _is_elf(os.path.join(d, n))]
    return elves + _bundle(lib, elves)


def _tag(elves):
    glibc = max(_glibc(p) for p in elves)
    return f"py3-none-manylinux_{glibc[0]}_{glibc[1]}_{platform.machine()}"


# ---- the archives ---------------------------------------------------------------------------------

def _hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _zip_add(z, record, arcname, data, mode):
    info = zipfile.ZipInfo(arcname, ZIP_DATE)
    info.external_attr = (0o100000 | mode) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)
    record.append(f"{arcname},{_hash(data)},{len(data)}")


def _write_wheel(pkg_root, wheel_directory, tag):
    version = _version()
    dist_info = f"{NAME}-{version}.dist-info"
    path = os.path.join(wheel_directory, f"{NAME}-{version}-{tag}.whl")
    record = []
    with zipfile.ZipFile(path, "w") as z:
        for d, dirs, files in os.walk(pkg_root):
            dirs.sort()
            for n in sorted(files):
                full = os.path.join(d, n)
                arc = os.path.relpath(full, pkg_root).replace(os.sep, "/")
                mode = 0o755 if os.stat(full).st_mode & 0o111 else 0o644
                with open(full, "rb") as f:
                    _zip_add(z, record, arc, f.read(), mode)
        wheel = (f"Wheel-Version: 1.0\nGenerator: ranksnap_wheel ({version})\n"
                 f"Root-Is-Purelib: false\nTag: {tag}\n")
        for n, text in (("METADATA", _metadata()), ("WHEEL", wheel),
                        ("entry_points.txt", ENTRY_POINTS), ("top_level.txt", f"{NAME}\n")):
            _zip_add(z, record, f"{dist_info}/{n}", text.encode(), 0o644)
        record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", ZIP_DATE)
        info.external_attr = 0o100644 << 16
        z.writestr(info, "\n".join(record) + "\n", zipfile.ZIP_DEFLATED)
    return os.path.basename(path)


# ---- PEP 517 ------------------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    settings = dict(config_settings or {})
    with tempfile.TemporaryDirectory(prefix="ranksnap-wheel-") as tmp:
        stage, root = os.path.join(tmp, "stage"), os.path.join(tmp, "wheel")
        _stage(settings, stage)
        elves = _layout(stage, os.path.join(root, NAME))
        tag = _tag(elves)
        name = _write_wheel(root, wheel_directory, tag)
    _say(f"wrote {name}")
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The files git tracks, and PKG-INFO: what building the wheel needs."""
    try:
        files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True,
                               capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"an sdist is made from a git checkout (git ls-files: {e})") from e
    base = f"{NAME}-{_version()}"
    path = os.path.join(sdist_directory, f"{base}.tar.gz")
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for f in sorted(x for x in files if x and os.path.isfile(os.path.join(ROOT, x))):
            t.add(os.path.join(ROOT, f), arcname=f"{base}/{f}", recursive=False)
        data = _metadata().encode()
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        info.size, info.mode = len(data), 0o644
        t.addfile(info, io.BytesIO(data))
    return os.path.basename(path)
