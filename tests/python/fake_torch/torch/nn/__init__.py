"""torch.nn of the stand-in: Module (torch/nn/modules/module.py) and Parameter."""
from .modules import module  # noqa: F401
from .modules.module import Module, Parameter  # noqa: F401
