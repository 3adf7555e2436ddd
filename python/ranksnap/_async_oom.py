"""_async_oom.py — the out-of-memory error of PyTorch's cudaMallocAsync backend that ends the
script, read for a rank ranksnap records itself (docs/PYTORCH.md, "backend:cudaMallocAsync").

That backend checks its own limit (torch.cuda.set_per_process_memory_fraction) before it calls
cudaMallocAsync, and has no OOM observer: a request over the limit never reaches the CUDA driver,
where ranksnap sees every other refusal. The torch.OutOfMemoryError it raises says the figures
(c10/cuda/CUDAMallocAsyncAllocator.cpp, mallocAsync; sizes as its format_size writes them):

    Allocation on device 0 would exceed allowed memory. (out of memory)
    Currently allocated     : 200.50 MiB
    Requested               : 64.00 MiB
    Device limit            : 139.80 GiB
    Free (according to CUDA): 138.12 GiB
    PyTorch limit (set by user-supplied memory fraction)
                            : 250.00 MiB

Python offers a hook where an error ends the script: sys.excepthook (threading.excepthook for a
thread). Both are chained: the previous hook prints the traceback as before, then the error is
read: the figures from its message, the request's frames from its traceback (innermost first:
where the script's call raised), handed to the library (ranksnap_framework_oom), which records
the rank's OOM and writes its file at once. A script that replaced sys.excepthook after torch was
imported, or that ends with sys.exit or os._exit while it handles the error (or raises another
one from it), is read as it leaves (Glue._leave). An error the script catches and goes on from
is not the rank's OOM (a batch-size search, a loop that skips a batch, probe that way): it is
not read. The same error comes when CUDA refused the request; the library tells the two apart.
"""
import re
import sys
import threading

from . import _off

_FIRST = re.compile(r"Allocation on device (\d+) would exceed allowed memory\. \(out of memory\)")
_SIZE = r"\s*:\s*(\d+(?:\.\d+)?) (bytes|KiB|MiB|GiB)\b"
_FIELDS = {  # the key, and the label of its line (the limit's value is on the next line)
    "allocated": r"Currently allocated",
    "requested": r"Requested",
    "device_total": r"Device limit",
    "device_free": r"Free \(according to CUDA\)",
    "limit": r"PyTorch limit \(set by user-supplied memory fraction\)",
}
_UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_NO_LIMIT = 1 << 63  # PyTorch's limit before a fraction is set is UINT64_MAX: none


def parse(message):
    """The figures of the backend's error message: a dict with device, requested, allocated,
    limit, device_free and device_total in bytes (0: not in the message; a limit of 0: none),
    `rounding`, how far each may be from the exact figure (the message gives two decimals of
    its unit), and `unread`, the figures the message did not give. None when it is not that
    error."""
    first = _FIRST.search(message)
    if first is None:
        return None
    out = {"device": int(first.group(1)), "unread": []}
    half = {}  # half the unit of the last decimal of each figure
    for key, label in _FIELDS.items():
        m = re.search(label + _SIZE, message[first.end():])
        if m is None:
            out[key] = 0
            out["unread"].append(key)
            continue
        unit = _UNITS[m.group(2)]
        out[key] = int(m.group(1)) if unit == 1 else round(float(m.group(1)) * unit)
        half[key] = 0 if unit == 1 else -(-unit * 5 // 1000)
    if out["limit"] >= _NO_LIMIT:
        out["limit"] = 0
        half.pop("limit", None)
    out["rounding"] = max([half.get(k, 0) for k in ("requested", "allocated", "limit")])
    return out


def frames(exc):
    """(code object, line) of each frame of the error's traceback, innermost first."""
    out = []
    tb = exc.__traceback__
    while tb is not None:
        out.append((tb.tb_frame.f_code, tb.tb_lineno or 0))
        tb = tb.tb_next
    out.reverse()
    return out


class Watch:
    """The error a script (or a thread) ends with, handed to `report(oom, frames)` when it is
    the backend's out-of-memory error, once; `say(line)` for one it cannot read."""

    def __init__(self, kinds, report, say):
        self.kinds = kinds
        self.report = report
        self.say = say
        self.done = []  # the errors handed over (compared by identity)

    def install(self):
        prev = sys.excepthook

        def excepthook(kind, value, tb):
            try:
                prev(kind, value, tb)
            finally:
                self.ended_by(value)

        sys.excepthook = excepthook
        prev_thread = threading.excepthook

        def thread_excepthook(args):
            try:
                prev_thread(args)
            finally:
                self.ended_by(args.exc_value)

        threading.excepthook = thread_excepthook

    def find(self, exc):
        """The out-of-memory error among `exc` and the errors it was raised from or while
        handling (__cause__, __context__: a SystemExit in the handler, a wrapping error)."""
        seen = 0
        while exc is not None and seen < 16:
            if isinstance(exc, self.kinds):
                return exc
            exc = exc.__cause__ or exc.__context__
            seen += 1
        return None

    def ended_by(self, *errors):
        """The script ends with `errors` (any may be None): the first out-of-memory error among
        them and their causes is reported, unless it was already. Never raises: the script's own
        error is what the user reads."""
        try:
            oom = next((o for o in map(self.find, errors) if o is not None), None)
            if oom is None or any(oom is d for d in self.done):
                return
            self.done.append(oom)
            got = parse(str(oom))
            if got is None:
                self.say("an OutOfMemoryError ends this rank, and its message is not the one of "
                         "PyTorch's cudaMallocAsync backend that ranksnap reads (\"Allocation on "
                         "device N would exceed allowed memory\"): not recorded as its OOM")
                return
            if "requested" in got["unread"]:
                self.say("the OutOfMemoryError that ends this rank does not say the size of the "
                         "request (its \"Requested\" line): its OOM is recorded with the size not "
                         "known")
            self.report(got, frames(oom))
        except Exception as e:
            _off.off("async oom", e, ours=True)
