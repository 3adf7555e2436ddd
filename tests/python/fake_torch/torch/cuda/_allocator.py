"""_allocator.py — the stand-in's caching allocator and its recorder, shaped like PyTorch 2.11's.

Not PyTorch's policy, only its vocabulary: requests rounded to 512 bytes; a request of at most
1 MiB takes a 2 MiB segment, below 10 MiB a 20 MiB one, above that its size rounded to 2 MiB;
one block per segment, the rest of the segment an inactive block; a freed block's segment is
cached and reused by a request of the same segment size; out of memory, the cached segments are
released and the request retried once. The recorder keeps what _record_memory_history keeps:
the trace (a ring of max_entries, cleared when recording stops), the stacks of allocations
(context "alloc" or "all"), the OOM entry and the observers, called with PyTorch's arguments
before the OutOfMemoryError is raised. The snapshot has the exact keys of PyTorch 2.11's
(tests/data/*.pickle).

With PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (read when torch is loaded, as PyTorch reads
it) it is PyTorch's CUDAMallocAsyncAllocator instead: every request is a cudaMallocAsync of its
exact size on the current stream and every free a cudaFreeAsync (the process's CUDA runtime,
called with the GIL released, as PyTorch's operators call it: ctypes.CDLL); a request that
would take its bytes past the limit of set_per_process_memory_fraction (that fraction of
cudaMemGetInfo's total, none before) is refused before cudaMallocAsync is called; a refusal,
either one, is PyTorch's OutOfMemoryError with PyTorch's message; and it has neither a recorder,
a snapshot nor OOM observers, which raise PyTorch's own messages.
"""
import ctypes
import os
import sys
import threading
import time
import traceback

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
TOTAL = 80 * GIB
CUBLAS_WORKSPACE = 2 * MIB
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../fake_torch/torch
# per thread, as in c10/cuda/CUDACachingAllocator.cpp: the user metadata (a thread_local string
# set by torch._C._cuda_setMemoryMetadata, copied into every trace entry, the OOM's included);
# `native` on the stand-in's autograd threads, which in PyTorch run C++ with no Python frame
TLS = threading.local()
BACKEND = ("cudaMallocAsync" if "backend:cudaMallocAsync" in
           os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "").replace(" ", "") else "native")


def no_support(what):
    """PyTorch's refusal of a call its cudaMallocAsync backend lacks."""
    return RuntimeError(f"cudaMallocAsync does not yet support {what}. If you need it, please "
                        "file an issue describing your use case.")


def _now_us():
    return time.time_ns() // 1000


def _round(n):
    return max(512, (n + 511) // 512 * 512)


def format_size(n):
    """c10's format_size: bytes up to 1 KiB, then two decimals of KiB, MiB or GiB."""
    if n <= KIB:
        return f"{n} bytes"
    if n <= MIB:
        return f"{n / KIB:.2f} KiB"
    if n <= GIB:
        return f"{n / MIB:.2f} MiB"
    return f"{n / GIB:.2f} GiB"


def _segment_size(n):
    if n <= MIB:
        return 2 * MIB
    if n < 10 * MIB:
        return 20 * MIB
    return (n + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


class OutOfMemoryError(RuntimeError):
    pass


class Allocator:
    def __init__(self):
        self.segments = {}        # address -> segment dict (PyTorch's shape)
        self.cached = []          # addresses of segments with no live block
        self.blocks = {}          # address of a live block -> segment address
        self.next_address = 0x7F0000000000
        self.limit = TOTAL
        self.recording = False
        self.context = None
        self.max_entries = sys.maxsize
        self.trace = []
        self.observers = []
        self.annotations = []
        # the pool new segments go to: (0, 0) the default one, a CUDA graph's while it captures
        # (cuda/graphs.py); a private pool's segments are reused only by its own requests and
        # stay reserved, as PyTorch keeps a live graph's pool
        self.pool = (0, 0)
        # PyTorch reserves segments with cudaMalloc, which a preloaded libranksnap.so sees (in
        # torch mode it passes every call through, and the first one starts ranksnap); the
        # stand-in calls it the same way and frees at once what a machine with a GPU gives.
        process = ctypes.CDLL(None)
        self.cuda_malloc = getattr(process, "cudaMalloc", None)
        self.cuda_free = getattr(process, "cudaFree", None)
        if self.cuda_malloc is not None:
            self.cuda_malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
            self.cuda_free.argtypes = [ctypes.c_void_p]
        self.used = {}            # backend:cudaMallocAsync: pointer -> bytes
        self.cublas_first = BACKEND == "cudaMallocAsync" and bool(os.environ.get("FAKE_TORCH_CUBLAS"))
        if BACKEND == "cudaMallocAsync":
            # CDLL: the GIL is released around the call, as PyTorch's operators release it
            runtime = ctypes.CDLL(None)
            self.malloc_async = runtime.cudaMallocAsync
            self.malloc_async.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                          ctypes.c_void_p]
            self.free_async = runtime.cudaFreeAsync
            self.free_async.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
            self.mem_get_info = runtime.cudaMemGetInfo
            self.mem_get_info.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2
            self.limit = (1 << 64) - 1  # pytorch_memory_limits before a fraction is set

    # ---- recorder ----
    def record_history(self, enabled, context, stacks, max_entries):
        if BACKEND == "cudaMallocAsync":
            raise no_support("recordHistory")
        if enabled is None:
            self.recording = False
            self.context = None
            self.trace = []       # PyTorch clears the history when recording stops
            return
        if enabled not in ("all", "state"):
            raise RuntimeError(f"_record_memory_history: enabled={enabled!r}")
        if stacks not in ("python", "all"):
            raise RuntimeError(f"_record_memory_history: stacks={stacks!r}")
        self.recording = enabled == "all"
        self.context = context
        self.max_entries = 1 if enabled == "state" else max(1, int(max_entries))

    def _frames(self):
        if self.context is None or getattr(TLS, "native", False):
            return []
        out = []
        for f in reversed(traceback.extract_stack()):
            if f.filename.startswith(_OWN + os.sep + "cuda"):
                continue  # the allocator's own frames are C++ in PyTorch
            if f.name == "_run" and f.filename.startswith(_OWN + os.sep + "autograd"):
                break  # a hook on the autograd thread: the engine under it is C++ in PyTorch
            out.append({"name": f.name, "filename": f.filename, "line": f.lineno or 0})
        return out

    def _record(self, action, **kw):
        if not self.recording:
            return
        frames = kw.pop("frames", None)
        entry = {"action": action}
        entry.update(kw)
        entry.setdefault("stream", 0)
        entry["time_us"] = _now_us()
        entry["compile_context"] = "N/A"
        entry["user_metadata"] = getattr(TLS, "user_metadata", "")
        if frames is not None:
            entry["frames"] = frames  # last, in PyTorch's order
        self.trace.append(entry)
        if len(self.trace) > self.max_entries:
            del self.trace[: len(self.trace) - self.max_entries]

    # ---- allocation ----
    def reserved(self):
        if BACKEND == "cudaMallocAsync":
            return sum(self.used.values())
        return sum(s["total_size"] for s in self.segments.values())

    def allocated(self):
        if BACKEND == "cudaMallocAsync":
            return sum(self.used.values())
        return sum(s["allocated_size"] for s in self.segments.values())

    def _device_memory(self):
        """cudaMemGetInfo's (free, total), as CUDAMallocAsyncAllocator asks it."""
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.mem_get_info(ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    def set_fraction(self, fraction):
        """set_per_process_memory_fraction: of the device's total, as each backend takes it."""
        total = self._device_memory()[1] if BACKEND == "cudaMallocAsync" else TOTAL
        self.limit = int(fraction * total)

    def _malloc_async(self, nbytes):
        """CUDAMallocAsyncAllocator's mallocAsync: the exact size, on the current stream, once
        PyTorch's own limit let it through."""
        if self.cublas_first:
            # cuBLAS's workspace, which that library takes from the driver itself on the
            # script's thread, the GIL released, the first time the script's math reaches it
            # (here: before the process's first request, when FAKE_TORCH_CUBLAS names it)
            self.cublas_first = False
            ctypes.CDLL(os.environ["FAKE_TORCH_CUBLAS"]).fake_cublas_workspace(ctypes.c_size_t(CUBLAS_WORKSPACE))
        p = ctypes.c_void_p()
        used = sum(self.used.values())
        if used + nbytes > self.limit or self.malloc_async(ctypes.byref(p), nbytes, None) != 0 or not p.value:
            free, total = self._device_memory()
            raise OutOfMemoryError(
                f"Allocation on device 0 would exceed allowed memory. (out of memory)\n"
                f"Currently allocated     : {format_size(used)}\n"
                f"Requested               : {format_size(nbytes)}\n"
                f"Device limit            : {format_size(total)}\n"
                f"Free (according to CUDA): {format_size(free)}\n"
                f"PyTorch limit (set by user-supplied memory fraction)\n"
                f"                        : {format_size(self.limit)}")
        self.used[p.value] = nbytes
        return p.value

    def _release_cached(self):
        for addr in [a for a in self.cached if self.segments[a]["segment_pool_id"] == (0, 0)]:
            seg = self.segments.pop(addr)
            self.cached.remove(addr)
            self._record("segment_free", addr=addr, size=seg["total_size"], frames=[])

    def malloc(self, nbytes):
        tracer = getattr(TLS, "tracer", None)
        if tracer is not None:
            # torch.compile tracing a model (the stand-in's _inductor/compile_fx.py): PyTorch
            # traces with fake tensors, which take no device memory
            tracer(nbytes, traceback.extract_stack()[:-1])
            return 0
        if BACKEND == "cudaMallocAsync":
            return self._malloc_async(nbytes)
        size = _round(nbytes)
        seg_size = _segment_size(size)
        frames = self._frames()
        addr = next((a for a in self.cached if self.segments[a]["total_size"] == seg_size and
                     self.segments[a]["segment_pool_id"] == self.pool), None)
        if addr is None:
            if self.reserved() + seg_size > self.limit:
                self._release_cached()
            if self.reserved() + seg_size > self.limit:
                free = TOTAL - self.reserved()
                kw = {"device_free": free, "size": nbytes}
                if self.context in ("alloc", "all"):
                    kw["frames"] = frames
                self._record("oom", **kw)
                for obs in list(self.observers):
                    obs(0, seg_size, self.limit, free)
                raise OutOfMemoryError(
                    f"CUDA out of memory. Tried to allocate {nbytes} bytes. GPU 0 has a total "
                    f"capacity of {TOTAL} bytes of which {free} bytes is free.")
            if self.cuda_malloc is not None:
                p = ctypes.c_void_p()
                if self.cuda_malloc(ctypes.byref(p), seg_size) == 0 and p.value:
                    self.cuda_free(p)
            addr = self.next_address
            self.next_address += seg_size + 2 * MIB
            self.segments[addr] = {
                "device": 0, "address": addr, "total_size": seg_size, "allocated_size": 0,
                "active_size": 0, "requested_size": 0, "stream": 0,
                "segment_type": "small" if seg_size == 2 * MIB else "large",
                "segment_pool_id": self.pool, "is_expandable": False,
                "frames": frames if self.context else [], "blocks": []}
            self._record("segment_alloc", addr=addr, size=seg_size,
                         frames=frames if self.context else [])
        else:
            self.cached.remove(addr)
        seg = self.segments[addr]
        blocks = [{"address": addr, "size": size, "requested_size": nbytes,
                   "state": "active_allocated", "frames": frames if self.context else []}]
        if seg_size > size:
            blocks.append({"address": addr + size, "size": seg_size - size, "requested_size": 0,
                           "state": "inactive", "frames": []})
        seg.update(blocks=blocks, allocated_size=size, active_size=size, requested_size=nbytes)
        self.blocks[addr] = addr
        self._record("alloc", addr=addr, size=nbytes,
                     frames=frames if self.context in ("alloc", "all") else [])
        return addr

    def free(self, addr):
        if BACKEND == "cudaMallocAsync":
            if self.used.pop(addr, None) is not None:
                self.free_async(addr, None)
            return
        seg_addr = self.blocks.pop(addr, None)
        if seg_addr is None:
            return
        seg = self.segments[seg_addr]
        size = seg["requested_size"]
        frames = self._frames() if self.context == "all" else []
        self._record("free_requested", addr=addr, size=size, frames=frames)
        self._record("free_completed", addr=addr, size=size, frames=frames)
        seg["blocks"] = [{"address": seg_addr, "size": seg["total_size"], "requested_size": 0,
                          "state": "inactive", "frames": []}]
        seg.update(allocated_size=0, active_size=0, requested_size=0)
        self.cached.append(seg_addr)

    def snapshot(self):
        if BACKEND == "cudaMallocAsync":
            raise RuntimeError("Calling snapshot with backend:cudaMallocAsync is not meaningful. "
                               "(For backend:native, snapshot returns a detailed summary of all "
                               "blocks tracked by the allocator, but the cudaMallocAsync backend "
                               "does not track individual blocks.)")
        return {
            "segments": [dict(s, blocks=[dict(b) for b in s["blocks"]])
                         for _, s in sorted(self.segments.items())],
            "device_traces": [list(self.trace)],
            "allocator_settings": {
                "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": False,
                "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False,
                "graph_capture_record_stream_reuse": False,
                "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}},
            "external_annotations": list(self.annotations),
        }


ALLOCATOR = Allocator()
