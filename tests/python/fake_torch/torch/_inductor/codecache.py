"""torch._inductor.codecache of the stand-in: PyCodeCache with the line maps of the wrappers it
loaded and stack_frames_for_code, as PyTorch 2.11 has them: a generated line's original frames,
innermost first, parsed from the FX node's stack_trace."""
import bisect
import re


class PyCodeCache:
    linemaps = {}

    @classmethod
    def load_by_key_path(cls, key, path, linemap=None):
        with open(path) as f:
            code = compile(f.read(), path, "exec")
        mod = {"__name__": "torch._inductor.codecache." + key, "__file__": path}
        exec(code, mod)
        if linemap:
            lines, traces = zip(*linemap)
            cls.linemaps[path] = (list(lines), list(traces))
        return mod

    @classmethod
    def stack_frames_for_code(cls, path, lineno):
        if path not in cls.linemaps or not cls.linemaps[path]:
            return None
        lines, traces = cls.linemaps[path]
        p = bisect.bisect_right(lines, lineno)
        if p == 0:
            return None
        trace = traces[p - 1]
        if not trace:
            return None
        found = re.findall(r'File "(.+)", line (\d+), in (.+)\n', trace)
        return [{"filename": f, "line": int(n), "name": name} for f, n, name in reversed(found)]
