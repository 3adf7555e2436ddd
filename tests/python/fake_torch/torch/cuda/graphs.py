"""torch.cuda.graphs of the stand-in: CUDAGraph (capture_begin, capture_end, replay, pool), the
torch.cuda.graph context manager and graph_pool_handle, as PyTorch 2.11 has them: what a graph
allocates while it captures comes from its private pool, (capture id, 0) of its own or the pool
handle given, whose segments stay reserved for its replays."""
import itertools

from . import _allocator

_ids = itertools.count(1)


def graph_pool_handle():
    return (0, next(_ids))


class CUDAGraph:
    def __init__(self):
        self._pool = None
        self._before = None
        self._captured = False

    def capture_begin(self, pool=None, capture_error_mode="global"):
        self._pool = tuple(pool) if pool is not None else (next(_ids), 0)
        self._captured = False
        self._before = _allocator.ALLOCATOR.pool
        _allocator.ALLOCATOR.pool = self._pool

    def capture_end(self):
        _allocator.ALLOCATOR.pool = self._before
        self._captured = True

    def replay(self):
        return None

    def pool(self):
        # as PyTorch's CUDAGraph::pool(): valid only once a capture has ended
        if not self._captured:
            raise RuntimeError("Called CUDAGraph::pool() without a preceding successful capture.")
        return self._pool


class graph:
    def __init__(self, cuda_graph, pool=None, stream=None, capture_error_mode="global"):
        self.cuda_graph = cuda_graph
        self.pool = () if pool is None else (pool,)

    def __enter__(self):
        self.cuda_graph.capture_begin(*self.pool)

    def __exit__(self, *exc):
        self.cuda_graph.capture_end()
        return False
