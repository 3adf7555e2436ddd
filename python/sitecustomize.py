"""sitecustomize.py — ranksnap's entry into a Python program started by ranksnap-run.

ranksnap-run puts this folder on PYTHONPATH, so Python's site module imports this file at start.
It does two things, and nothing at all unless RANKSNAP_RECORDER is set (ranksnap-run sets it for
Python programs), so that a PYTHONPATH left over in a shell is harmless:

- it runs the next sitecustomize on sys.path, if any (a site's or a virtualenv's own), as if this
  one were not there: copies of this file further down the path (an installed ranksnap, a link
  to python/) are recognised by their first line, not their path, and passed over, so that the
  chain ends at the site's own however many copies there are;
- it waits for `import torch`: a finder on sys.meta_path catches that one import, lets it finish
  and then installs ranksnap's PyTorch integration (ranksnap/_torch.py). Processes that never
  import torch are left alone.
"""
import importlib.machinery
import importlib.util
import os
import sys

# The docstring's first line, which every version of this file has had: what makes a file a copy
# of ranksnap's glue, wherever it is.
_MARK = "ranksnap's entry into a Python program started by ranksnap-run".encode()


def _is_glue(origin):
    try:
        with open(origin, "rb") as f:
            return _MARK in f.read(1024)
    except OSError:
        return False


def _chain():
    """Runs the sitecustomize this one hides, under its own name: the first on sys.path that is
    not a copy of this glue."""
    for entry in sys.path:
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", [entry])
        if spec is None or spec.loader is None or not spec.origin or _is_glue(spec.origin):
            continue
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)
        return


def _on_torch(torch):
    # never the reason a training script fails, but said: a failure to install is ranksnap's, and
    # ranksnap/_off.py may be what failed to import, so this line is written here
    try:
        from ranksnap import _torch
        _torch.install(torch)
    except Exception as e:
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
        try:
            # a wrapper that leaves no frame of its own in the traceback of an import of torch
            # that fails (ranksnap/_wrap.py)
            from ranksnap._wrap import around
        except Exception as e:  # a broken install of the glue: said, torch imported as without it
            sys.stderr.write(f"ranksnap: not recording this PyTorch process: {type(e).__name__}: {e}\n")
            return spec
        spec.loader.exec_module = around(spec.loader.exec_module,
                                         after=lambda out, module: _on_torch(module))
        return spec


# once per process, whichever copy of the glue runs (a copy imported by other means included)
if os.environ.get("RANKSNAP_RECORDER") and \
        not any(type(h).__name__ == "_TorchImportHook" for h in sys.meta_path):
    if "torch" in sys.modules:
        _on_torch(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportHook())
try:
    _chain()
except Exception as e:  # the site's code, not ranksnap's: said as Python's site module would
    sys.stderr.write(f"ranksnap: the site's own sitecustomize failed: {type(e).__name__}: {e}\n")
