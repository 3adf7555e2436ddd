"""torch.distributed.fsdp of the stand-in: fully_shard as FSDP2 hooks a module. The module's own
parameters, as the optimizer holds them, are its shards; a forward pre-hook swaps in their
all-gathered copies (new tensors, the module's parameters while it runs), and a forward hook
swaps the shards back (reshard_after_forward) and registers a hook on the output's gradient
(Tensor.register_hook) which, before the module's backward runs, on the autograd thread, in
torch's own Python, all-gathers the parameters again (a buffer of their size times the
module's `fsdp_gather_scale`: 1, a test script raises it to run out of memory there), then
swaps the shards back for a module that kept its copies through the forward."""
import functools


def fully_shard(module, reshard_after_forward=True):
    shards = dict(module._parameters)
    module.fsdp_gather_scale = 1
    module.register_forward_pre_hook(functools.partial(_pre_forward, shards))
    module.register_forward_hook(functools.partial(_post_forward, shards, reshard_after_forward))
    return module


def _pre_forward(shards, module, args):
    from ...nn import Parameter
    for name, p in shards.items():
        setattr(module, name, Parameter(p.nbytes))
    return None


def _post_forward(shards, reshard, module, args, output):
    if reshard:
        _reshard(module, shards)
    if getattr(output, "grad_fn", None) is not None:
        output.register_hook(functools.partial(_pre_backward, module, shards))
    return None


def _pre_backward(module, shards, grad):
    _unshard(module)
    _reshard(module, shards)
    return None


def _unshard(module):
    from ... import empty
    nbytes = sum(p.nbytes for p in module.parameters()) * module.fsdp_gather_scale
    gathered = empty(nbytes)
    del gathered


def _reshard(module, shards):
    for name, p in shards.items():
        setattr(module, name, p)
