"""ranksnap — the GPU memory culprit of a multi-rank job, from Python.

Nothing here is needed: ranksnap-run loads ranksnap into a PyTorch job without a change to the
script (docs/PYTORCH.md). For those who want to say more:

    import ranksnap
    ranksnap.step(n)            # step n begins (instead of counting optimizer steps)
    ranksnap.dump()             # this rank's snapshot now, RANKSNAP_DIR/rank-RRRRR.pickle
    with ranksnap.annotate("forward"):
        ...                     # a named range in the history

The functions talk to the libranksnap.so that ranksnap-run preloaded; without it they raise
ranksnap.NotLoaded.
"""
import contextlib

from . import _lib
from ._lib import NotLoaded

__all__ = ["step", "dump", "annotate", "NotLoaded"]


def _glue():
    from . import _torch
    return _torch.current()


def step(n):
    """Marks the start of step n on this rank (every rank numbers its steps alike); ranksnap's
    schedule (--steps) starts and stops recording on these numbers. Once called, optimizer
    steps are no longer counted."""
    g = _glue()
    if g is not None:
        g.manual_step(n)
        return
    status = _lib.lib().ranksnap_step(int(n))
    if status == _lib.ERR_NOT_INITIALIZED:
        status = _lib.lib().ranksnap_init(None) or _lib.lib().ranksnap_step(int(n))
    if status != _lib.OK:
        raise RuntimeError("ranksnap.step: " + _lib.error(status))


def dump(path=None):
    """Writes this rank's snapshot now: RANKSNAP_DIR/rank-RRRRR.pickle for PyTorch jobs (or
    `path`), written atomically, 0600."""
    g = _glue()
    if g is not None:
        g.identify()  # this rank's files under the rank torch.distributed gives it
    status = _lib.lib().ranksnap_dump(path.encode() if path else None)
    if status != _lib.OK:
        raise RuntimeError("ranksnap.dump: " + _lib.error(status))


@contextlib.contextmanager
def annotate(name):
    """A named range in the history. In a PyTorch job it is PyTorch's record_function, which its
    snapshot keeps among external_annotations (the thread that started recording: the one that
    steps); else ranksnap's own annotation."""
    g = _glue()
    if g is not None and g.mode == "torch":
        with g.torch.profiler.record_function(name):
            yield
        return
    l = _lib.lib()
    l.ranksnap_annotate_begin(name.encode())
    try:
        yield
    finally:
        l.ranksnap_annotate_end(name.encode())
