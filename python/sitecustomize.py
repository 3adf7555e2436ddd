"""sitecustomize.py — ranksnap's entry into a Python program started by ranksnap-run.

ranksnap-run puts this folder on PYTHONPATH, so Python's site module imports this file at start.
It does two things, and nothing at all unless RANKSNAP_RECORDER is set (ranksnap-run sets it for
Python programs), so that a PYTHONPATH left over in a shell is harmless:

- it runs the next sitecustomize on sys.path, if any (a site's or a virtualenv's own), as if this
  one were not there;
- it waits for `import torch`: a finder on sys.meta_path catches that one import, lets it finish
  and then installs ranksnap's PyTorch integration (ranksnap/_torch.py). Processes that never
  import torch are left alone.
"""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain():
    """Runs the sitecustomize this one hides, under its own name."""
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None or not spec.origin or \
            os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _on_torch(torch):
    try:
        from ranksnap import _torch
        _torch.install(torch)
    except Exception as e:  # never the reason a training script fails
        sys.stderr.write(f"ranksnap: not recording this PyTorch process: {type(e).__name__}: {e}\n")


class _TorchImportHook:
    """A meta path finder for the one name `torch`: finds it through the other finders and
    wraps its loader so that ranksnap's integration runs once torch is fully imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _on_torch(module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("RANKSNAP_RECORDER"):
    if "torch" in sys.modules:
        _on_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook())
try:
    _chain()
except Exception as e:
    sys.stderr.write(f"ranksnap: the site's own sitecustomize failed: {type(e).__name__}: {e}\n")
