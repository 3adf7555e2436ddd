"""torch._inductor of the stand-in: compile_fx, which writes a compiled model's wrapper and loads
it into codecache's PyCodeCache with its line map, and cudagraph_trees, what
torch.compile(mode="reduce-overhead") runs a compiled model through."""
