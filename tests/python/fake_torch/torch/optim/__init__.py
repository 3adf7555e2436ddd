"""torch.optim of the stand-in."""
from . import optimizer  # noqa: F401
from .optimizer import SGD, Optimizer  # noqa: F401
