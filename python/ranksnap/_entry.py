"""_entry.py — the `ranksnap` and `ranksnap-run` commands of a pip install (its entry points).

The wheel carries the programs in this package's bin/ folder; each command runs its program in
its own place (exec), so that the signals, the exit status and the terminal are the program's,
and ranksnap-run finds the library beside it (../lib).
"""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _exec(name):
    path = os.path.join(_BIN, name)
    try:
        os.execv(path, [path] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"{name}: cannot run {path}: {e.strerror} (the ranksnap wheel installs it "
                         "there: pip install --force-reinstall ranksnap)\n")
        return 127


def main():
    return _exec("ranksnap")


def run():
    return _exec("ranksnap-run")
