"""torch.optim of the stand-in."""
from . import optimizer  # noqa: F401
from .optimizer import SGD, Optimizer  # noqa: F401

# as PyTorch's torch/optim/__init__.py does: the submodule is importable, not an attribute
del optimizer
