"""_steps.py — what a step is in a PyTorch job, found with no flag, and what it was based on
(docs/PYTORCH.md, "Steps").

- Training: a post-hook on every optimizer's step() (torch.optim.optimizer.
  register_optimizer_step_post_hook) counts the steps of the first optimizer that steps (a GAN's
  second optimizer does not count twice); step n is the iteration after the n-th.
- No optimizer (inference, evaluation, generation, a compiled model replaying CUDA graphs): a
  step is a call of the outermost module, the model the script calls, or a call of the
  `generate` method of that model's class, which calls it once per token. The model is the first
  module with parameters called while no other runs, found by a global forward pre-hook that goes
  at once (a global module hook sends every module call down PyTorch's slow path, and makes
  torch.compile warn), or the module torch.compile is given. A call counts as a step only on
  evidence that no optimizer will follow: it runs with gradients off (torch.no_grad,
  inference_mode, generate), or the model's last call made an autograd graph that no backward
  pass used before this one. A call
  followed by a backward pass and no optimizer step (gradient accumulation before its first
  step, training without torch.optim) is not a step, and the reason is said when no step comes.
- From the first optimizer step on, the optimizer counts, continuing the numbers the model's
  calls gave before (an evaluation before training).
- ranksnap.step(n): the script's own numbers replace all of it.

Each time the basis changes, ranksnap_steps_from says it, in the words the report prints
("steps: calls of Net, the outermost module: no optimizer, gradients off") and the warning about
a range never reached adds to what the user can do.
"""
import importlib
import sys
import weakref

from . import _off, _wrap

# frames looked through for a running generate: a model's forward is some tens of frames below it
_GENERATE_DEPTH = 64


def _has_parameters(module):
    try:
        return next(iter(module.parameters()), None) is not None
    except (AttributeError, RuntimeError, TypeError):  # a half-built module: not the model
        return False


def _generate_frame(f):
    """The innermost frame named `generate` from f outwards, None when there is none near."""
    for _ in range(_GENERATE_DEPTH):
        if f is None:
            return None
        if f.f_code.co_name == "generate":
            return f
        f = f.f_back
    return None


def _output_node(output):
    node = getattr(output, "grad_fn", None)
    if node is not None:
        return node
    items = output.values() if isinstance(output, dict) else output if isinstance(output, (tuple, list)) else ()
    for o in items:
        node = getattr(o, "grad_fn", None)
        if node is not None:
            return node
    return None


class Steps:
    def __init__(self, torch, give, say_how):
        self.torch = torch
        self.give = give            # give(n): ranksnap_step(n), the glue's
        self.say_how = say_how      # say_how(text): ranksnap_steps_from, the glue's
        self.count = 0              # optimizer steps of the first optimizer
        self.first = None           # weakref to it
        self.manual = False         # ranksnap.step(n) was called: nothing here counts any more
        self.base = 0               # the optimizer's step n is step base + n
        self.finder = None          # the global pre-hook that finds the model, while it looks
        self.model = None           # weakref to the outermost module, once found
        self.name = None            # its class's name
        self.compiled = False       # torch.compile was called (no global module hook may stay)
        self.hooks = []             # the model's own hooks
        self.calls = 0              # calls of the model (outside generate) and of generate
        self.given = -1             # the last step given from them
        self.graph = False          # the model's last call made an autograd graph ...
        self.backward = False       # ... and a backward pass ran from it since
        self.pending = None         # why the last call was not a step
        self.wrapped = set()        # the classes whose generate is wrapped
        self.gen_counted = False    # the model's class has a generate, whose wrapper counts it
        self.how = ""

    def install(self):
        try:
            importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(
                self._on_optimizer_step)
        except (ImportError, AttributeError, TypeError) as e:
            _off.off("optimizer steps", e)
        try:
            mod = importlib.import_module("torch.nn.modules.module")
            self.finder = mod.register_module_forward_pre_hook(self._find)
        except (ImportError, AttributeError, TypeError) as e:
            _off.off("model steps", e)
            self.finder = None
        compile_ = getattr(self.torch, "compile", None)
        if compile_ is not None:
            self.torch.compile = _wrap.around(compile_, after=self._compiled)

    # ---- saying how -------------------------------------------------------------------------

    def _say(self, how):
        if how != self.how:
            self.how = how
            self.say_how(how)

    def why_none(self):
        """Before finalising: what was seen, when no step was given."""
        if self.manual or self.count or self.given >= 0:
            return
        if self.model is None:
            self._say("none: no optimizer stepped, and no module with parameters was called "
                      "outside a compiled function")
        elif self.pending:
            self._say(f"none: no optimizer stepped, and {self._name()} {self.pending}")

    def _name(self):
        return self.name or "the model"

    # ---- the script's own numbers and the optimizer ------------------------------------------

    def manual_step(self, n):
        self.manual = True
        self._drop_model_hooks()
        self._say("ranksnap.step")
        self.give(n)

    def _on_optimizer_step(self, optimizer, args, kwargs):
        # a hook of PyTorch's, in the script's optimizer.step(): nothing of it may reach the script
        try:
            if self.manual:
                return
            first = self.first() if self.first is not None else None
            if first is None:
                # the first optimizer, or a new one after it was dropped (a new run in the process)
                self.first = weakref.ref(optimizer)
                first = optimizer
            if optimizer is not first:
                return
            if self.count == 0:
                self._drop_model_hooks()
                name = type(optimizer).__name__
                if self.given >= 0:
                    self.base = self.given
                    self._say(f"optimizer steps ({name}) from step {self.given + 1}; "
                              f"steps 0-{self.given} were calls of the outermost module")
                else:
                    self._say(f"optimizer steps ({name})")
            self.count += 1
            self.give(self.base + self.count)
        except Exception as e:
            _off.off("optimizer steps", e, ours=True)

    # ---- the outermost module ----------------------------------------------------------------

    def _find(self, module, args):
        """Global forward pre-hook, until the model is found: the first module with parameters
        called (the outermost first, so no other is running)."""
        try:
            if self.model is None and not self.manual and not self.count and _has_parameters(module):
                self._adopt(module)
                # this call is the model's first: the hook just put on it runs from the next one
                self._on_call(module, args)
        except Exception as e:
            _off.off("model steps", e, ours=True)
        return None

    def _stop_finding(self):
        _wrap.drop(self.finder)
        self.finder = None

    def _compiled(self, out, model=None, *args, **kwargs):
        """After torch.compile of a module (or of a module's method): no global module hook may
        stay (dynamo would guard on it and OptimizedModule warns of it), and the module it was
        given is the model, now the compiled one (OptimizedModule), or the module whose forward
        was compiled in its place. A function compiled (a library's helper, a decorator not yet
        given its module) changes nothing: the model may still be called as it is."""
        module_type = getattr(getattr(self.torch, "nn", None), "Module", None)
        if module_type is None or not (isinstance(model, module_type) or
                                       isinstance(getattr(model, "__self__", None), module_type)):
            return
        self.compiled = True
        self._stop_finding()
        if self.manual or self.count:
            return
        if isinstance(out, module_type) and isinstance(model, module_type):
            current = self.model() if self.model is not None else None
            if current is None or current is model:
                self._adopt(out)
        elif (isinstance(getattr(model, "__self__", None), module_type) and self.model is None and
              getattr(model, "__name__", "") == "forward"):
            # torch.compile(model.forward): calls still go through the model's __call__ (not so
            # Module.compile(), whose compiled __call__ would trace the hooks)
            self._adopt(model.__self__)

    def _adopt(self, module):
        self._stop_finding()
        self._drop_model_hooks()
        self.model = weakref.ref(module)
        # a compiled model is named by the class it was compiled from
        orig = getattr(module, "_orig_mod", None)
        self.name = f"{type(orig).__name__} (compiled)" if orig is not None else type(module).__name__
        self.hooks = [module.register_forward_pre_hook(self._on_call),
                      module.register_forward_hook(self._on_return)]
        self.gen_counted = False
        for klass in type(module).__mro__:
            if "generate" in vars(klass):
                real = vars(klass)["generate"]
                if klass not in self.wrapped and callable(real):
                    setattr(klass, "generate", _wrap.around(real, before=self._on_generate))
                    self.wrapped.add(klass)
                self.gen_counted = klass in self.wrapped
                break

    def _drop_model_hooks(self):
        for h in self.hooks:
            _wrap.drop(h)
        self.hooks = []
        self._stop_finding()

    def _on_generate(self, *args, **kwargs):
        if self.manual or self.count:
            return
        self._unit("generate", False)

    def _on_call(self, module, args):
        try:
            if self.manual or self.count:
                return None
            if self.gen_counted and _generate_frame(sys._getframe(1)) is not None:
                # a call of the model inside its generate: the generate is the step. Only the
                # first generate, running when the model was found, has no wrapper that counted it.
                if self.calls == 0:
                    self._unit("generate", False)
                return None
            self._unit("call", self.torch.is_grad_enabled())
        except Exception as e:
            _off.off("model steps", e, ours=True)
        return None

    def _on_return(self, module, args, output):
        """While the decision waits on it: whether a backward pass runs from this call's output
        (a pre-hook on its autograd node), i.e. whether the model is being trained."""
        try:
            if not self.manual and not self.count:
                node = _output_node(output)
                self.graph = node is not None
                if node is not None:
                    node.register_prehook(self._on_backward)
        except Exception as e:  # Node.register_prehook changed: no call can be told inference
            _off.off("model steps", e)
        return None

    def _on_backward(self, grad_outputs):
        self.backward = True
        return None

    def _unit(self, kind, grad):
        """A call of the model or of generate: step k (its number among them) when the evidence
        says no optimizer will follow."""
        k = self.calls
        self.calls += 1
        graph, backward = self.graph, self.backward
        self.graph = self.backward = False
        name = self._name()
        if kind == "generate":
            how = f"generate calls of {name}: no optimizer"
        elif not grad:
            how = f"calls of {name}, the outermost module: no optimizer, gradients off"
        elif graph and not backward:
            # the last call made a graph that no backward pass used: it was not a training step
            how = f"calls of {name}, the outermost module: no optimizer, no backward pass"
        else:
            self.pending = ("was followed by a backward pass at each call (training without "
                            "torch.optim?)") if backward else \
                "was called with gradients on, and no call showed whether a backward pass follows"
            return
        self.pending = None
        self._say(how)
        self.given = k
        self.give(k)
