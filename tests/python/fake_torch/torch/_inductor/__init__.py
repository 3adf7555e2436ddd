"""torch._inductor of the stand-in: cudagraph_trees, what torch.compile(mode="reduce-overhead")
runs a compiled model through."""
