"""_off.py — the one way the glue says that something it does is off in this process.

The glue rests on calls PyTorch keeps private (torch._C._cuda_setMemoryMetadata,
_current_autograd_node, _cuda_attach_out_of_memory_observer, torch.cuda.memory's
_record_memory_history and _snapshot, an autograd node's metadata and register_prehook,
distributed_c10d's store, dynamo's counters, Inductor's PyCodeCache, CUDAGraph's capture calls,
DeviceMesh's layout) and runs code of its own inside the script's calls and PyTorch's hooks.
When a PyTorch release renames or removes one of those calls, or ranksnap's own code fails in a
hook, the user's job goes on as without that part of ranksnap — and the user reads one line on
stderr, once per process and capability, saying which capability is off, why, and what the
report shows instead:

    ranksnap: naming the backward pass by the model's layers is off: torch._C._cuda_setMemoryMetadata is missing (torch 2.12.0); its allocations keep PyTorch's empty stacks

The lines said also go into every pickle this rank writes afterwards (the "ranksnap" key's
"off", _torch.py), so that a report read later can be checked against them.

off() is called only where something failed: the paths that run per allocation or per step pay
nothing, and a capability said once costs one dict look-up after that.
"""
import os
import sys

_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

# capability -> (what it does, what the user gets instead while it is off)
CAPS = {
    "recorder": ("recording with PyTorch's recorder (torch.cuda.memory._record_memory_history)",
                 "this rank's ranges record no history; its pickles hold the allocator's state alone"),
    "driver recorder": ("recording this rank at the CUDA driver, as backend:cudaMallocAsync has no "
                        "recorder of PyTorch's (ranksnap_record_natively)",
                        "PyTorch's recorder refuses to start: this rank's ranges record no history"),
    "stopping": ("stopping PyTorch's recorder at a range's end",
                 "it may record on past the range, at what recording costs"),
    "snapshot": ("writing this rank's snapshot (torch.cuda.memory._snapshot)",
                 "this rank writes no pickle, and the report names it missing"),
    "oom dump": ("a snapshot at an out-of-memory (torch._C._cuda_attach_out_of_memory_observer)",
                 "an out-of-memory is seen only in the pickles written at a range's end"),
    "reserved": ("telling PyTorch's reserved bytes apart from the device memory outside its "
                 "allocator (torch.cuda.memory_reserved)",
                 "the report counts them as outside the allocator"),
    "gather": ("gathering over torch.distributed",
               "rank 0 meets the other ranks in RANKSNAP_DIR's files"),
    "identity": ("taking this rank's rank and world size from torch.distributed",
                 "they come from the launcher's environment"),
    "job id": ("agreeing on one job id through torch.distributed's store "
               "(distributed_c10d._get_default_store)",
               "each rank keeps its launcher's job id (ranks started by different parents may "
               "be read as different jobs: ranksnap report --allow-mixed-jobs)"),
    "optimizer steps": ("counting the optimizer's steps",
                        "steps come from the model's calls, or from ranksnap.step(n) in the script"),
    "model steps": ("finding the steps from the model's calls",
                    "without an optimizer, call ranksnap.step(n) at the start of iteration n"),
    "backward": ("naming the backward pass by the model's layers",
                 "its allocations keep PyTorch's empty stacks"),
    "oom": ("naming an out-of-memory in the backward pass by its layer",
            "the request is named by its Python frames alone"),
    "async oom": ("naming an out-of-memory error that PyTorch's own limit raised under "
                  "backend:cudaMallocAsync (the OutOfMemoryError that ends the script)",
                  "only a request CUDA refused is this rank's OOM"),
    "before": ("naming the blocks allocated before the range by the tensors they hold",
               "they are named \"allocated before step N\" alone"),
    "graphs": ("naming CUDA graphs' pools by the line that captured them",
               "a pool with no stack is named \"CUDA graph pool\" where its id shows a capture, "
               "else by what it cannot tell"),
    "generated": ("naming torch.compile's generated code by the source it was compiled from",
                  "its allocations are named by the generated file's lines"),
    "compiled": ("telling a torch.compile'd job",
                 "a compiled model may recompile at each range's start and end"),
    "roles": ("finding the ranks' roles from torch's DeviceMesh and process groups",
              "set RANKSNAP_GROUPS (e.g. pp=2,dp=4) to compare each rank with its role"),
    "exit": ("writing this rank's snapshot as it leaves through os._exit",
             "the report names the rank missing"),
    "hooks": ("taking ranksnap's hooks off again",
              "a hook left on costs its call and does nothing"),
    "traceback": ("taking ranksnap's frame off the script's tracebacks",
                  "a traceback may show a frame of ranksnap's _wrap.py"),
}

_said = {}   # capability -> the line said, in the order said


def off(cap, why, ours=False, what=None, instead=None):
    """Says once per process that capability `cap` (a key of CAPS, or one described by `what`
    and `instead`) is off, and why: an exception, or a sentence. `ours`: the failure is
    ranksnap's own code's, not a PyTorch call's (the line says so, with where). Never raises."""
    if cap in _said:
        return
    w, i = CAPS.get(cap, (cap, "the job goes on without it"))
    line = f"{what or w} is off: {_why(why, ours)} (torch {_version()}); {instead or i}"
    if _said.setdefault(cap, line) is not line:
        return  # another thread said it first
    try:
        sys.stderr.write(f"ranksnap: {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr closed or gone: nowhere to say it
        pass


def said():
    """The lines said in this process, in order (for the pickle's "ranksnap" key)."""
    return list(_said.values())


def _version():
    return getattr(sys.modules.get("torch"), "__version__", "?")


def _why(e, ours):
    if not isinstance(e, BaseException):
        return str(e)
    text = f"{type(e).__name__}: {e}"
    if not ours:
        return text
    where = ""
    tb = e.__traceback__
    while tb is not None:
        path = tb.tb_frame.f_code.co_filename
        if path.startswith(_OWN_DIR):
            where = f" at {os.path.basename(path)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"ranksnap's own code failed ({text}{where}; please report it)"
