"""torch._dynamo of the stand-in: eval_frame's OptimizedModule, what torch.compile returns for a
module."""
from . import eval_frame  # noqa: F401
