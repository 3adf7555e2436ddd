"""_graphs.py — the line that captured each CUDA graph, which names the graph's private memory pool
in the report ("CUDA graph pool of main (infer.py:41)", collector/analyze/pools.h).

A captured graph (torch.cuda.graph, torch.compile's mode="reduce-overhead") allocates from a pool
of its own, reserved for its replays. Its segments carry their pool's id in the snapshot
(segment_pool_id), and the stack of the allocation that made them only when PyTorch's recorder
ran then: a graph captured before the range (the usual case, at the first calls of a compiled
model) leaves them without one. So CUDAGraph.capture_begin, which every capture goes through, is
watched: the user's line that led to it (past torch's and installed packages' frames) is kept
with the pool's id (CUDAGraph.pool()), and at the dump a segment of that pool with no frames gets
two: PyTorch's capture code, then that line. Captures are rare: the cost is nothing per step.
"""
import os
import sys

from . import _names, _wrap


class Graphs:
    def __init__(self, torch, off):
        self.torch = torch
        self.off = off             # off(why): the names are lost, said once (Names.off)
        self.captures = {}         # pool id -> frames, innermost first
        torch_dir = os.path.dirname(os.path.abspath(getattr(torch, "__file__", "") or "."))
        self.torch_dir = torch_dir + os.sep
        self.capture_file = os.path.join(torch_dir, "cuda", "graphs.py")

    def install(self):
        cls = getattr(getattr(self.torch, "cuda", None), "CUDAGraph", None)
        begin = getattr(cls, "capture_begin", None)
        if begin is None:
            return
        try:
            cls.capture_begin = _wrap.around(begin, after=self._captured)
        except Exception as e:
            self.off(e)

    def _captured(self, out, graph, *args, **kwargs):
        try:
            pool = tuple(int(x) for x in graph.pool())
            if pool in self.captures:
                return
            user = _names._user_frame(sys._getframe(1), self.torch_dir)
            frames = [_names._frame("capture_begin", self.capture_file, 0)]
            if user is not None:
                frames.append(user)
            self.captures[pool] = frames
        except Exception as e:
            self.off(e)

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
