"""torch.utils.hooks of the stand-in: RemovableHandle, and `register`, which the stand-in's
global hook registries (optimizer steps, module calls) share."""
import itertools

_ids = itertools.count()


class RemovableHandle:
    def __init__(self, hooks, key):
        self.hooks, self.key = hooks, key

    def remove(self):
        self.hooks.pop(self.key, None)


def register(hooks, hook):
    key = next(_ids)
    hooks[key] = hook
    return RemovableHandle(hooks, key)
