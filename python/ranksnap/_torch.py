"""_torch.py — ranksnap inside a PyTorch process: PyTorch's own allocator and recorder, driven by
ranksnap's schedule (RANKSNAP_RECORDER=torch, docs/PYTORCH.md).

Installed when `torch` is imported (sitecustomize.py), with no change to the training script:

- the recorder: ranksnap_set_recorder gets the four ops of include/ranksnap.h. ranksnap calls
  start at the first step of a range (torch.cuda.memory._record_memory_history with the C
  library's max_entries and RANKSNAP_STACKS), dump at its end, on ranksnap_dump and on a fatal
  signal (torch.cuda.memory._snapshot() plus the metadata ranksnap passes, under the key
  "ranksnap", pickled as PyTorch's _dump_snapshot does), and stop after the dump (PyTorch clears
  its history on stop). Settings come from the C library's one options table, never from the
  environment here.
- steps (_steps.py): the first optimizer's steps, else the calls of the outermost module (or of
  its generate) when the evidence says no optimizer follows; ranksnap.step(n) replaces both for
  who prefers to say. What they were based on goes to ranksnap_steps_from.
- out of memory: PyTorch's OOM observer (torch._C._cuda_attach_out_of_memory_observer, attached
  through torch.cuda._lazy_call so that only processes that initialise CUDA do it, never a
  DataLoader worker) writes this rank's file at once, with the failing request: PyTorch's own
  `oom` trace entry when recording, else one added with the Python stack of the request. It
  runs on the allocating thread with the GIL, before PyTorch raises: it makes no collective call
  and catches everything, so that the OutOfMemoryError reaches the training script unchanged.
- identity: once the script has a torch.distributed process group (taken right after
  init_process_group returns, and at each step for a group made another way), this rank's rank
  and world size are the group's, and its job id the one the first rank to ask put in the group's
  store (ranksnap_set_identity), given before anything is written: Lightning starts its ranks with
  LOCAL_RANK and WORLD_SIZE only, each with another parent, so the launcher's environment gives
  neither the rank nor one job. A process started as one of several without a rank is not
  recorded until then (ranksnap_init says so).
- roles (_groups.py): the DeviceMesh dimensions and process groups this rank was in, watched as
  the script makes them, go in the dump's "ranksnap" key as its communicators: the report groups
  the ranks into roles (pipeline stage, tensor rank) by them with no --groups.
- names (_names.py): inside a range, the backward pass's allocations, and the OOM's request made
  there, are named by the module or autograd node that made them; at the dump, the blocks alive
  before the range are labelled as such and named by the parameter or optimizer state they hold.
- RANKSNAP_RECORDER=ranksnap (ranksnap-run --torch-allocator ranksnap): ranksnap's own allocator
  instead, as PyTorch's pluggable allocator, swapped in now, before CUDA is initialised.
- backend:cudaMallocAsync (PYTORCH_CUDA_ALLOC_CONF), whose allocator has no recorder and no OOM
  observer: told to the library before it starts (ranksnap_record_natively), which then records
  the rank itself at the CUDA driver, with the Python frames of the allocating thread, and writes
  a .rsnap; PyTorch's allocator keeps serving every request. The ops stay registered for the
  gather over torch.distributed; start, stop and dump are not called. A request over PyTorch's
  own limit never reaches the driver: the OutOfMemoryError that ends the script is read instead
  (_async_oom.py).

Every callback catches its exceptions: an exception escaping a ctypes callback is printed and
answered with 0, which would read as success.
"""
import atexit
import builtins
import ctypes
import gc
import importlib
import json
import os
import pickle
import sys
import threading
import time
import traceback

from . import _async_oom, _dist, _generated, _graphs, _groups, _lib, _names, _off, _steps, _wrap

_glue = None


def install(torch):
    """Once per process; returns the glue."""
    global _glue
    if _glue is None:
        _glue = Glue(torch)
        _glue.install()
    return _glue


def current():
    return _glue


class Glue:
    def __init__(self, torch):
        self.torch = torch
        self.lib = _lib.lib()
        self.mode = None            # "torch" or "ranksnap" once installed
        self.native = None          # why ranksnap records this rank itself, when it does
        self.how = None             # what the steps are based on, not yet told to the library
        self.initialised = False
        self.init_failed = False
        self.said = set()
        self.pending_oom = None     # the OOM being dumped
        self.last_oom = None
        self.group = _dist.Group(torch)
        self.ops = None             # the callbacks, kept alive as long as C may call them
        self.identity = None        # (rank, world size, job) from torch.distributed, once known
        self.exit_code = None       # what sys.exit was given last
        self.async_oom = None       # backend:cudaMallocAsync: the OOM error that ends the script
        self.exit_oom = None        # the OOM error in hand when sys.exit was called
        self.left = False           # _leave ran
        self.at_step = None         # the step given to ranksnap_step last
        self.steps = _steps.Steps(torch, give=self.step, say_how=self._steps_from)
        # names for what has no Python frame (_names.py)
        self.names = _names.Names(torch, compiled=lambda: self.steps.compiled)
        # the line that captured each CUDA graph, for its pool's name (_graphs.py)
        self.graphs = _graphs.Graphs(torch)
        # compiled code's frames named by its source (_generated.py)
        self.generated = _generated.Generated()
        # the DeviceMeshes and process groups the script makes (_groups.py); a mesh made before
        # any init_process_group call (init_device_mesh makes the group) gives the identity too
        self.groups = _groups.Groups(torch, on_group=self.identify)

    # ---- installing --------------------------------------------------------------------------

    def install(self):
        ops = self._make_ops()
        self._record_natively_if_no_recorder()
        status = self.lib.ranksnap_set_recorder(ctypes.byref(ops))
        if status == _lib.OK:
            self.mode = "torch"
            self.ops = ops
            # the driver's interposers see a refused request (the backend has no observers)
            if not self.native:
                self._defer_cuda(self._attach_oom_observer)
        elif status == _lib.ERR_UNSUPPORTED:
            self.mode = "ranksnap"
            self._use_pluggable_allocator()
        else:
            # a bad RANKSNAP_* value: the library says so once, and passes through
            if status != _lib.ERR_OPTION:
                self._say("not recording this process: " + _lib.error(status))
            return
        self.steps.install()
        atexit.register(self._at_exit)
        self._watch_exits()
        if self.native:
            self._watch_async_oom()
        self._watch_process_group()
        if self.mode == "torch":
            self.groups.install()
            self.graphs.install()

    def _record_natively_if_no_recorder(self):
        """PyTorch's cudaMallocAsync backend has no recorder (_record_memory_history raises
        "cudaMallocAsync does not yet support recordHistory") and no snapshot: ranksnap records
        the rank itself then, told before it starts. The backend is fixed when torch is loaded
        (PYTORCH_CUDA_ALLOC_CONF), so asking now initialises nothing."""
        try:
            backend = self.torch.cuda.get_allocator_backend()
        except Exception:  # an older torch: the recorder's own refusal says it (_start)
            return
        if backend != "cudaMallocAsync":
            return
        why = "PyTorch's recorder does not support backend:cudaMallocAsync"
        # with the GIL held (PyDLL), so that the library can check here how to read the Python
        # frames of the threads that allocate without it, as PyTorch's operators do
        status = _lib.with_gil("ranksnap_record_natively")(why.encode())
        if status == _lib.OK:
            self.native = why
        elif status != _lib.ERR_UNSUPPORTED:  # RANKSNAP_RECORDER=ranksnap needs nothing
            _off.off("driver recorder", f"{why}, and the library refused: " + _lib.error(status))

    def _watch_exits(self):
        """The ways out that tell how the program ends, which _at_exit cannot see by itself: the
        status of the SystemExit that ends the program, and os._exit, which runs no atexit hook
        at all."""

        def record(status=None, exc=None):
            # elsewhere it ends a thread, not the program
            if threading.current_thread() is threading.main_thread():
                self.exit_code = status
                # sys.exit called while handling an out-of-memory error (only that one is kept:
                # an error holds its frames' tensors)
                if self.async_oom is not None:
                    self.exit_oom = self.async_oom.find(exc if exc is not None else sys.exc_info()[1])

        if not _watch_system_exit(record):
            sys.exit = _wrap.around(sys.exit, before=record)
            _watch_quitters(record)

        def leave(status):
            # leaving this way skips every cleanup, the peers' included: never a collective; and
            # nothing of ranksnap's may keep the process from leaving
            try:
                self._leave(failing=True, status=status)
            except BaseException as e:
                _off.off("exit", e, ours=True)

        os._exit = _wrap.around(os._exit, before=leave)

    def _watch_async_oom(self):
        """backend:cudaMallocAsync refuses a request over PyTorch's own limit before it calls
        CUDA, where the library would see it, and has no OOM observer: the OutOfMemoryError that
        ends the script is read instead (_async_oom.py)."""
        torch = self.torch
        kinds = tuple({k for k in (getattr(torch, "OutOfMemoryError", None),
                                   getattr(torch.cuda, "OutOfMemoryError", None)) if isinstance(k, type)})
        if not kinds:
            _off.off("async oom", "torch.OutOfMemoryError is missing")
            return
        self.async_oom = _async_oom.Watch(kinds, self._framework_oom, self._say)
        self.async_oom.install()

    def _framework_oom(self, oom, frames):
        """PyTorch's cudaMallocAsync backend raised out of memory (oom: the figures of its
        message; frames: the request's, innermost first): the library records the rank's OOM,
        unless CUDA refused it and the driver's wrappers recorded it already, and writes the
        rank's file at once."""
        try:
            # a rank that learns its rank from torch.distributed may not have started yet
            self.identify()
            self._ensure_init()
            status = _lib.framework_oom(oom, frames)
            if status != _lib.OK:
                self._say("out of memory: not recorded: " + _lib.error(status))
        except BaseException as e:  # the script ends with its own error, never one of ranksnap's
            _off.off("async oom", e, ours=True)

    def _watch_process_group(self):
        """torch.distributed.init_process_group gives this rank its identity at once (identify),
        before the script allocates on the GPU and makes NCCL's communicators, which ranksnap
        measures only once it has started. Steps ask again, for groups made another way."""
        dist = getattr(self.torch, "distributed", None)
        init = getattr(dist, "init_process_group", None)
        if init is None:
            return
        dist.init_process_group = _wrap.around(init, after=lambda group, *a, **k: self.identify())

    def _make_ops(self):
        ops = _lib.RecorderOps()
        ops.ctx = None
        ops.start = _lib.START(self._start)
        ops.stop = _lib.STOP(self._stop)
        ops.dump = _lib.DUMP(self._dump)
        ops.reserved = _lib.RESERVED(self._reserved)
        ops.gather = _lib.GATHER(self._gather)
        ops.bcast = _lib.BCAST(self._bcast)
        ops.holds_lock = _lib.gil_check_address()
        return ops

    def _defer_cuda(self, fn):
        """fn once CUDA is initialised in this process (now if it is)."""
        cuda = self.torch.cuda
        lazy = getattr(cuda, "_lazy_call", None)
        if lazy is not None:
            lazy(fn)
        elif cuda.is_initialized():
            fn()
        else:
            _off.off("oom dump", "torch.cuda._lazy_call is missing and CUDA is not initialised yet")

    def _use_pluggable_allocator(self):
        cuda = self.torch.cuda
        if cuda.is_initialized():
            self._say("--torch-allocator ranksnap: CUDA was initialised before torch was imported "
                      "here; PyTorch's allocator stays")
            return
        alloc = cuda.memory.CUDAPluggableAllocator(_lib.path(), "ranksnap_torch_malloc",
                                                   "ranksnap_torch_free")
        cuda.memory.change_current_allocator(alloc)

    def _attach_oom_observer(self):
        try:
            self.torch._C._cuda_attach_out_of_memory_observer(self._on_oom)
        except Exception as e:  # missing, or refused: the cudaMallocAsync backend has no observers
            _off.off("oom dump", e)

    def _say(self, msg):
        if msg in self.said:
            return
        self.said.add(msg)
        sys.stderr.write(f"ranksnap: {msg}\n")
        sys.stderr.flush()

    # ---- steps -------------------------------------------------------------------------------

    def identify(self):
        """This rank's identity from torch.distributed, given to ranksnap once the script has a
        process group (before that, the launcher's environment is all there is). The job id is
        agreed through the group's store: the first rank to ask puts its own there (compare_set
        is atomic and never waits), every rank takes what is there."""
        if self.identity is not None:
            return
        dist = getattr(self.torch, "distributed", None)
        try:
            if dist is None or not dist.is_available() or not dist.is_initialized():
                return
            rank, size = int(dist.get_rank()), int(dist.get_world_size())
        except Exception as e:  # never the reason a script fails, but said
            _off.off("identity", e)
            return
        job = None
        buf = ctypes.create_string_buffer(512)
        if self.lib.ranksnap_job(buf, len(buf)) == _lib.OK:
            job = buf.value
            try:
                c10d = importlib.import_module("torch.distributed.distributed_c10d")
                got = c10d._get_default_store().compare_set("ranksnap/job", "", job.decode())
                job = got if isinstance(got, bytes) else str(got).encode()
            except Exception as e:  # no store (or an old one): this rank's own job id
                _off.off("job id", e)
        self.identity = (rank, size, job)
        status = self.lib.ranksnap_set_identity(rank, size, job or None)
        if status != _lib.OK:
            self._say(f"torch.distributed's rank {rank} of {size}: " + _lib.error(status))

    def _ensure_init(self):
        if self.initialised or self.init_failed:
            return self.initialised
        status = self.lib.ranksnap_init(None)
        if status == _lib.ERR_NOT_INITIALIZED:
            # started without a rank: a later step, once torch.distributed gives it, starts it
            self._say((self.lib.ranksnap_last_error() or b"").decode("utf-8", "replace"))
            return False
        if status != _lib.OK:
            self.init_failed = True
            self._say("not recording this process: " + _lib.error(status))
            return False
        self.initialised = True
        return True

    def step(self, n):
        self.identify()
        if not self._ensure_init():
            return
        self._tell_how()
        self.at_step = int(n)
        self.names.stepped()
        status = self.lib.ranksnap_step(int(n))
        if status != _lib.OK:
            self._say(f"step {n}: " + _lib.error(status))

    def manual_step(self, n):
        self.steps.manual_step(n)

    def _steps_from(self, how):
        self.how = how
        self._tell_how()

    def _tell_how(self):
        """What the steps are based on, to the library once it runs (the first step starts it)."""
        if self.how is not None and self.lib.ranksnap_steps_from(self.how.encode()) == _lib.OK:
            self.how = None

    # ---- the recorder's ops (called by libranksnap) ------------------------------------------

    def _start(self, ctx, max_entries, stacks):
        try:
            memory = self.torch.cuda.memory
            kw = {"enabled": "all", "max_entries": int(max_entries)}
            if stacks < 0:
                kw["context"] = None
                kw["stacks"] = "python"  # "all" would warm up the C++ unwinder for nothing
            else:
                # stacks of allocations (what sites are made of), not of frees: half the cost
                kw["context"] = "alloc"
                kw["stacks"] = "all" if stacks == 1 else "python"
            try:
                memory._record_memory_history(**kw)
            except RuntimeError as e:
                if "does not yet support recordHistory" in str(e):
                    # a backend get_allocator_backend did not name when torch was imported:
                    # too late for ranksnap to record it itself, since it started
                    _off.off("recorder", e,
                             instead="this rank's ranges record no history (ranksnap records a "
                                     "backend without a recorder itself when "
                                     "torch.cuda.get_allocator_backend() names it at import)")
                    return -1
                if kw.get("stacks") != "all":
                    raise
                self._say(f"RANKSNAP_STACKS=all: {e}; recording Python frames only")
                kw["stacks"] = "python"
                memory._record_memory_history(**kw)
            if stacks >= 0:
                self.names.begin(self.at_step, self.steps.first)
            return 0
        except Exception as e:
            _off.off("recorder", e)
            return -1

    def _stop(self, ctx):
        try:
            self.names.end()
            self.torch.cuda.memory._record_memory_history(enabled=None)
            return 0
        except Exception as e:
            _off.off("stopping", e)
            return -1

    def _dump(self, ctx, meta, arg, put):
        # the snapshot makes dicts by the hundred thousand, none of them cyclic: the collections
        # they would set off scan the script's whole heap (a quarter of the dump's time with a
        # transformers GPT-2: 0.153 s per 100k entries collecting, 0.117 s not)
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._dump_snapshot(meta, arg, put)
        finally:
            if collecting:
                gc.enable()

    def _dump_snapshot(self, meta, arg, put):
        try:
            snap = self.torch.cuda.memory._snapshot()
            m = json.loads(meta.decode("utf-8"))
            if self.pending_oom is not None:
                self._add_oom(snap, m, self.pending_oom)
            self.graphs.name_pools(snap)
            self.names.name_snapshot(snap)
            self.generated.name_snapshot(snap)
            comms = self.groups.communicators()
            if comms:
                m["communicators"] = comms
            off = _off.said()
            if off:
                m["off"] = off
            snap["ranksnap"] = m
            # protocol 4, the one PyTorch's _dump_snapshot writes and MemoryViz.js reads
            data = pickle.dumps(snap, protocol=4)
            put(arg, data, len(data))
            return 0
        except Exception as e:
            _off.off("snapshot", e)
            return -1

    def _reserved(self, ctx):
        try:
            cuda = self.torch.cuda
            # never the call that initialises CUDA
            return int(cuda.memory_reserved()) if cuda.is_initialized() else 0
        except Exception as e:
            _off.off("reserved", e)
            return 0

    def _gather(self, ctx, buf, n, timeout_s, arg, take):
        try:
            data = ctypes.string_at(buf, n) if n else b""
            out = self.group.gather(data, timeout_s)
            if out is None:
                return -1
            for rank, got in enumerate(out):
                if got:
                    take(arg, rank, got, len(got))
            return 0
        except Exception as e:  # the group is broken from now on (_dist.py)
            _off.off("gather", e)
            return -1

    def _bcast(self, ctx, buf, n, timeout_s):
        try:
            got = self.group.bcast(ctypes.string_at(buf, n), timeout_s)
            if got is None or len(got) != n:
                return -1
            ctypes.memmove(buf, got, n)
            return 0
        except Exception as e:
            _off.off("gather", e)
            return -1

    # ---- out of memory -----------------------------------------------------------------------

    def _on_oom(self, device, alloc, device_limit, device_free):
        """PyTorch's OOM observer: (device, bytes it tried to reserve, the per-process cap or the
        device's capacity, the device's free bytes)."""
        try:
            key = (self.steps.count, int(device))
            if key == self.last_oom:
                return
            self.last_oom = key
            frames = [{"name": f.name, "filename": f.filename, "line": f.lineno or 0}
                      for f in reversed(traceback.extract_stack()[:-1])]
            self.pending_oom = {"device": int(device), "size": int(alloc),
                                "limit": int(device_limit), "device_free": int(device_free),
                                "time_us": time.time_ns() // 1000, "frames": frames,
                                # a request of the backward pass has no Python frame
                                "named": self.names.oom_frames()}
            # a rank that learns its rank from torch.distributed may not have started yet
            self.identify()
            self._ensure_init()
            status = self.lib.ranksnap_dump(None)
            if status != _lib.OK:
                self._say("out of memory: the snapshot was not written: " + _lib.error(status))
        except BaseException as e:  # never in place of the OutOfMemoryError, but said
            _off.off("oom dump", e, ours=True)
        finally:
            self.pending_oom = None

    def _add_oom(self, snap, meta, oom):
        meta["reason"] = "oom"
        total = meta.get("device", {}).get("total_bytes", 0)
        if oom["limit"] and (not total or oom["limit"] < total):
            meta["memory_limit_bytes"] = oom["limit"]
        traces = snap.setdefault("device_traces", [])
        while len(traces) <= oom["device"]:
            traces.append([])
        trace = traces[oom["device"]]
        named = oom.get("named") or []
        # recording: PyTorch wrote the entry just before calling the observers
        own = [e for e in trace[-8:] if e.get("action") == "oom"]
        if own:
            own[-1]["frames"] = self.names.oom_request(own[-1].get("frames") or [], named)
            return
        trace.append({"action": "oom", "device_free": oom["device_free"], "size": oom["size"],
                      "stream": 0, "time_us": oom["time_us"], "compile_context": "N/A",
                      "user_metadata": "", "frames": self.names.oom_request(oom["frames"], named)})

    # ---- the end ----------------------------------------------------------------------------

    def _exit_status(self):
        """The status the interpreter exits with, as it will compute it: 1 for an exception the
        main script did not catch (the interpreter keeps it in sys.last_exc / sys.last_value
        before it calls any sys.excepthook, the script's own included), else the SystemExit's
        code (None is 0, an int itself, anything else is printed and gives 1)."""
        if getattr(sys, "last_exc", None) is not None or getattr(sys, "last_value", None) is not None:
            return 1
        code = self.exit_code
        if code is None:
            return 0
        return code if isinstance(code, int) else 1

    def _failing(self):
        """Whether the program ends failing: an uncaught exception, or a SystemExit with a status
        other than 0."""
        return self._exit_status() != 0

    def _at_exit(self):
        status = self._exit_status()
        self._leave(status != 0, status)

    def _leave(self, failing, status=1):
        """Before the interpreter goes: an open range is gathered now (its ops need Python), and
        the ops are taken back so that nothing calls them later. A program that ends failing (the
        OutOfMemoryError of a script that does not catch it, sys.exit(1), os._exit) abandons the
        gather and the MPI world ranksnap joined: its peers wait elsewhere (in the training
        collective it left), so it writes its own snapshot and leaves at once, and the launcher
        sees it end as without ranksnap. Its status is noted first, for the snapshot it writes
        and the report: the C library's exit path would see it after ranksnap is finalized."""
        if self.left:
            return
        self.left = True
        try:
            self.steps.why_none()
            if failing and self.async_oom is not None:
                # the error that ends the script, where its hooks did not see it (the script's
                # own sys.excepthook replaced the glue's), or the one in hand at sys.exit or
                # os._exit
                last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
                self.async_oom.ended_by(last, self.exit_oom, sys.exc_info()[1])
            if failing:
                self.lib.ranksnap_exiting(status if -2**31 <= status < 2**31 else 1)
                self.lib.ranksnap_abandon()
            self.lib.ranksnap_finalize()
        finally:
            if self.mode == "torch":
                self.lib.ranksnap_set_recorder(None)


def _watch_system_exit(record):
    """Python 3.12+: record(code) for the SystemExit that leaves the main thread's outermost frame
    (nothing can catch it there: the interpreter exits with its code), however it was raised:
    sys.exit, `raise SystemExit(1)`, the exit() and quit() builtins, a sys.exit bound before the
    glue came. A sys.monitoring PY_UNWIND callback, called only when a frame is left by an
    exception. False where there is no sys.monitoring or no free tool id."""
    mon = getattr(sys, "monitoring", None)
    if mon is None:
        return False
    for tool in (4, 3):  # 0-2 and 5 are the debugger's, coverage's, the profiler's, optimizers'
        try:
            mon.use_tool_id(tool, "ranksnap")
            break
        except ValueError:
            continue
    else:
        return False

    def unwind(code, offset, exc):
        if isinstance(exc, SystemExit) and sys._getframe(1).f_back is None:
            record(exc.code, exc)

    mon.register_callback(tool, mon.events.PY_UNWIND, unwind)
    mon.set_events(tool, mon.events.PY_UNWIND)
    return True


def _watch_quitters(record):
    """Before 3.12: the exit() and quit() builtins (site's Quitter) record their status too. What
    stays unseen there: `raise SystemExit(1)`, and a sys.exit bound before the glue replaced it."""
    quitter = type(getattr(builtins, "exit", None))
    call = getattr(quitter, "__call__", None)
    if quitter.__module__ != "_sitebuiltins" or call is None:
        return

    quitter.__call__ = _wrap.around(call, before=lambda self, code=None: record(code))
