"""torch.nn.modules of the stand-in."""
from . import module  # noqa: F401
