"""_graphs.py — the line that captured each CUDA graph, which names the graph's private memory pool
in the report ("CUDA graph pool of main (infer.py:41)", collector/analyze/pools.h).

A captured graph (torch.cuda.graph, torch.compile's mode="reduce-overhead") allocates from a pool
of its own, reserved for its replays. Its segments carry their pool's id in the snapshot
(segment_pool_id), and the stack of the allocation that made them only when PyTorch's recorder
ran then: a graph captured before the range (the usual case, at the first calls of a compiled
model) leaves them without one. So CUDAGraph.capture_begin, which every capture goes through, is
watched for the Python stack that led to it (up to _MAX_FRAMES frames out, ranksnap's own left
out), and
capture_end for the pool's id: CUDAGraph.pool() is valid only after a successful capture (before,
PyTorch raises), and a capture given a shared pool (torch.cuda.graph_pool_handle(), as
torch.compile's CUDA graph trees give one) names it at capture_begin already. At the dump a
segment of that pool with no frames gets PyTorch's capture code, then that stack, and the reader
picks the user's line in it by its own rules (collector/analyze/pools.c): a graph of CUDA graph
trees is captured under Inductor's generated code (cHASH.py in its cache, outside torch) and the
compiled model's forward, which the reader looks past to the script's line that called the model;
a line picked here by the folder alone would have been the generated code's, which the reader
skips, leaving the pool unnamed. Captures are rare: the cost is nothing per step.
"""
import os
import sys

from . import _names, _off, _wrap

_MAX_FRAMES = 256
_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class Graphs:
    def __init__(self, torch):
        self.torch = torch
        self.captures = {}         # pool id -> frames, innermost first
        self.pending = {}          # id of a graph being captured -> (pool given, frames)
        torch_dir = os.path.dirname(os.path.abspath(getattr(torch, "__file__", "") or "."))
        self.torch_dir = torch_dir + os.sep
        self.capture_file = os.path.join(torch_dir, "cuda", "graphs.py")

    def install(self):
        cls = getattr(getattr(self.torch, "cuda", None), "CUDAGraph", None)
        begin, end = getattr(cls, "capture_begin", None), getattr(cls, "capture_end", None)
        if begin is None or end is None:
            _off.off("graphs", "torch.cuda.CUDAGraph.capture_begin or capture_end is missing")
            return
        try:
            cls.capture_begin = _wrap.around(begin, before=self._begin)
            cls.capture_end = _wrap.around(end, after=self._end)
        except (AttributeError, TypeError) as e:  # a class that takes no new attributes
            _off.off("graphs", e)

    def _begin(self, graph, pool=None, *args, **kwargs):
        """The stack that captures `graph`, innermost first, and the pool it was given, kept until
        its capture ends."""
        try:
            frames = [_names._frame("capture_begin", self.capture_file, 0)]
            f = sys._getframe(1)
            while f is not None and len(frames) <= _MAX_FRAMES:
                code = f.f_code
                if not code.co_filename.startswith(_OWN_DIR):
                    frames.append(_names._frame(code.co_name, code.co_filename, f.f_lineno))
                f = f.f_back
            self.pending[id(graph)] = (pool, frames)
        except Exception as e:
            _off.off("graphs", e, ours=True)

    def _end(self, out, graph, *args, **kwargs):
        pool, frames = self.pending.pop(id(graph), (None, None))
        if frames is None:
            return
        try:
            pool = graph.pool()
        except Exception as e:
            if pool is None:  # else the pool given to capture_begin names it as well
                _off.off("graphs", e)
                return
        try:
            self.captures.setdefault(tuple(int(x) for x in pool), frames)
        except Exception as e:  # a pool id of another shape than PyTorch 2.11's pair of ints
            _off.off("graphs", e)

    def name_pools(self, snap):
        """Frames for the segments of a captured graph's pool that have none, and for the blocks
        alive in them that have none (the graph's outputs and what it keeps, made as it was
        captured): before Names labels them as bytes of before the range."""
        if not self.captures:
            return
        for seg in snap.get("segments", []):
            frames = self.captures.get(tuple(seg.get("segment_pool_id") or ()))
            if frames is None:
                continue
            if not seg.get("frames"):
                seg["frames"] = frames
            for b in seg.get("blocks", []):
                if not b.get("frames") and b.get("state") != "inactive":
                    b["frames"] = frames
