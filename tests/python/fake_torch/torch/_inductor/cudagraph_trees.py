"""torch._inductor.cudagraph_trees of the stand-in: a compiled model under mode="reduce-overhead"
runs eagerly once (warm-up), is recorded into a CUDA graph at its second call, in a private pool
of the tree's (graph_pool_handle, as PyTorch's), and replayed from then on, its outputs held in
that pool. With Inductor's graph partitions (options={"graph_partition": True}) the code Inductor
generated (a cHASH.py of its cache, outside torch) calls the partitions it made, and the capture
runs under that file's frame."""
from ..cuda import graphs
from . import compile_fx

# the generated code under graph partitions: it calls the partition that captures
_RUNNER = "# the stand-in's generated code, calling its partitions\n\n\ndef call(partition, args):\n    return partition(*args)\n"


class Tree:
    def __init__(self, partitions=False):
        self.calls = 0
        self.graph = None
        self.out = None
        self.pool = graphs.graph_pool_handle()
        self.runner = compile_fx.load_generated(_RUNNER)["call"] if partitions else None

    def _record(self, model, args, kwargs):
        self.graph = graphs.CUDAGraph()
        with graphs.graph(self.graph, pool=self.pool):
            self.out = model(*args, **kwargs)
        return self.out

    def run(self, model, args, kwargs):
        self.calls += 1
        if self.calls == 1:
            return model(*args, **kwargs)
        if self.graph is None:
            if self.runner is not None:
                return self.runner(self._record, (model, args, kwargs))
            return self._record(model, args, kwargs)
        self.graph.replay()
        return self.out
