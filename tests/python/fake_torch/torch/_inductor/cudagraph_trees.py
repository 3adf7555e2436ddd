"""torch._inductor.cudagraph_trees of the stand-in: a compiled model under mode="reduce-overhead"
runs eagerly once (warm-up), is recorded into a CUDA graph at its second call, in a private pool
of the tree's (graph_pool_handle, as PyTorch's), and replayed from then on, its outputs held in
that pool."""
from ..cuda import graphs


class Tree:
    def __init__(self):
        self.calls = 0
        self.graph = None
        self.out = None
        self.pool = graphs.graph_pool_handle()

    def run(self, model, args, kwargs):
        self.calls += 1
        if self.calls == 1:
            return model(*args, **kwargs)
        if self.graph is None:
            self.graph = graphs.CUDAGraph()
            with graphs.graph(self.graph, pool=self.pool):
                self.out = model(*args, **kwargs)
            return self.out
        self.graph.replay()
        return self.out
