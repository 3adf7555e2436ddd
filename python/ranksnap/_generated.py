"""_generated.py — the frames of code torch.compile generated, named by the source it was compiled
from (docs/PYTORCH.md, "Compiled models").

Inductor runs a compiled model as a Python wrapper it wrote (a file of its cache,
/tmp/torchinductor_USER/c2/c225j4....py), whose `call` allocates the buffers: PyTorch records
that file's line as the allocation's innermost Python frame, and every site of a compiled model
would be "call (c225j4....py:53)". PyTorch keeps the way back: when it loads a wrapper it keeps
the wrapper's line map (the FX node each line was generated for, with the node's stack_trace,
the user's frames dynamo traced), and PyCodeCache.stack_frames_for_code(path, line) gives those
frames, innermost first. At the dump, each generated frame among a stack's innermost ones gets
them put in front of it: the site is the model's line, as in eager mode, and the generated file
stays in the stack, one click away in report.html and in PyTorch's viewer. In the backward pass
(a compiled backward runs on the autograd thread, under torch/_functorch's backward) the frames
are those of the forward whose gradient it computes, and the innermost is named "backward of
FUNCTION".

Only in a process whose PyCodeCache has line maps, i.e. that ran compiled code; a frame is looked
up once per dump.
"""
import itertools
import sys

from . import _off

# the innermost frames of a stack looked at: a wrapper's allocation is its innermost Python frame,
# a kernel's launch or autotuning a few of torch's frames under it
_DEPTH = 8


def _backward(frames, start):
    """Whether the frames outside `start` run a compiled backward: torch/_functorch's backward,
    among the outermost (an autograd thread has no Python frame above the engine's call)."""
    for f in frames[max(start, len(frames) - 4):]:
        name = f.get("name") or ""
        if "backward" in name and "_functorch" in (f.get("filename") or ""):
            return True
    return False


class Generated:
    def name_snapshot(self, snap):
        cache = getattr(sys.modules.get("torch._inductor.codecache"), "PyCodeCache", None)
        linemaps = getattr(cache, "linemaps", None)
        if not linemaps:
            return
        lookup = getattr(cache, "stack_frames_for_code", None)
        if lookup is None:
            _off.off("generated", "torch._inductor.codecache.PyCodeCache.stack_frames_for_code is missing")
            return
        generated = set(linemaps)
        filename = itertools.repeat("filename")
        # by the id of a frame dict (PyTorch's snapshot shares one dict among the stacks with
        # that frame): the model's frames to put in front of it, [] for a frame with none
        sources = {}
        # by the id of a stack's outermost frame dict: whether it runs a compiled backward
        backwards = {}
        done = set()  # the lists named already: a list two entries share is named once

        def source(f):
            got = sources.get(id(f))
            if got is None:
                got = []
                try:
                    found = lookup(f.get("filename"), f.get("line") or 0) or []
                    got = [{"name": g["name"], "filename": g["filename"], "line": int(g["line"])} for g in found]
                except Exception as e:
                    _off.off("generated", e)
                sources[id(f)] = got
            return got

        def fix(frames):
            """Names the list in place (the snapshot is this dump's own): the model's frames go in
            front of the first generated one."""
            # most stacks have no generated frame: told apart in C (map, isdisjoint), as a dump
            # goes over some hundred thousand of them
            if not isinstance(frames, list) or not frames or \
                    generated.isdisjoint(map(dict.get, itertools.islice(frames, _DEPTH), filename)):
                return
            if id(frames) in done:
                return
            done.add(id(frames))
            for i in range(min(len(frames), _DEPTH)):
                if frames[i].get("filename") not in generated:
                    continue
                orig = source(frames[i])
                if orig:
                    outer = id(frames[-1])
                    bw = backwards.get(outer)
                    if bw is None:
                        bw = backwards[outer] = _backward(frames, i + 1)
                    if bw:
                        orig = [dict(orig[0], name="backward of " + orig[0]["name"])] + orig[1:]
                frames[i:i] = orig
                return

        for trace in snap.get("device_traces", []):
            for e in trace:
                fix(e.get("frames"))
        for seg in snap.get("segments", []):
            fix(seg.get("frames"))
            for b in seg.get("blocks", []):
                fix(b.get("frames"))
