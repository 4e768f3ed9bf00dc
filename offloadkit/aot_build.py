"""Build the module of ``offloadkit.aot``: record the kernels Python calls, compile them with pycc.

:func:`recording` watches every call of a numba dispatcher from Python (calls between
kernels are native and not seen) and keeps, per kernel, the argument types and the
return type numba compiled for them. :func:`build` exports each recorded
(kernel, signature) from one ``numba.pycc.CC`` module, named after this install's
fingerprint, with the export table beside it. ``offloadkit warmup`` runs both after the
numba warmup, recording the capture verbs on the shipped captures (``offloadkit.warmup``).

Not exported: the TCP simulator's kernels (``engine.tcp``: its event loop takes about two
minutes to compile, which ``warmup`` cannot afford twice per CI run), and signatures with
argument types other than numeric arrays and scalars. Those calls run on numba.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from . import aot, numba_cache
from .packet.jit import kernel_key

NOT_EXPORTED = ("offloadkit.engine.tcp.",)   # module prefixes left to numba (see the docstring)


@contextlib.contextmanager
def recording():
    """Within the block, every Python call of a numba dispatcher of the package is recorded:
    yields ``{"module:qualname": {arg types: (dispatcher, signature)}}``."""
    from numba.core.dispatcher import Dispatcher
    calls: dict[str, dict[tuple, tuple]] = {}
    seen: set = set()
    base_call = Dispatcher.__call__

    def call(self, *args, **kwargs):
        if kwargs or len(args) != self.py_func.__code__.co_argcount:
            bound = inspect.signature(self.py_func).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, {}
        types = tuple(self.typeof_pyval(a) for a in args)
        result = base_call(self, *args, **kwargs)
        if (id(self), types) not in seen:
            seen.add((id(self), types))
            if self.py_func.__module__.startswith("offloadkit."):
                if types not in self.overloads:
                    self.compile(types)
                calls.setdefault(kernel_key(self.py_func), {})[types] = (self, self.overloads[types].signature)
        return result

    Dispatcher.__call__ = call
    try:
        yield calls
    finally:
        Dispatcher.__call__ = base_call


def exports(calls) -> tuple[list[tuple[str, str, object, object]], list[str]]:
    """``[(symbol, kernel, py_func, signature)]`` to export, and the lines on what is left to numba."""
    chosen, left = [], []
    for kernel in sorted(calls):
        for types, (disp, sig) in sorted(calls[kernel].items(), key=lambda kv: str(kv[0])):
            names = [str(t) for t in types]
            if kernel.startswith(NOT_EXPORTED):
                left.append(f"{kernel}: the simulator, numba only")
            elif not all(aot.exportable(n) for n in names):
                left.append(f"{kernel}({', '.join(names)}): argument types not exported")
            else:
                chosen.append((f"k{len(chosen)}", kernel, calling(disp), sig))
    return chosen, sorted(set(left))


def calling(dispatcher):
    """A function calling ``dispatcher`` with the same arguments: what pycc compiles, so the
    kernel itself is numba's own compile of it (loaded from numba's cache, not typed again)."""
    names = list(inspect.signature(dispatcher.py_func).parameters)
    params = ", ".join(f"a{i}" for i in range(len(names)))
    scope = {"kernel": dispatcher}
    exec(f"def entry({params}):\n    return kernel({params})\n", scope)
    return scope["entry"]


def build(calls, folder: Path | None = None) -> tuple[Path, list[str]]:
    """Compile the recorded calls into ``folder`` (default ``numba_cache.aot_dir()``); returns
    the module's path and the lines on what stays on numba. Older modules there are removed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # numba.pycc's pending deprecation
        from numba.pycc import CC
    folder = Path(folder or numba_cache.aot_dir())
    folder.mkdir(parents=True, exist_ok=True)
    fp = aot.fingerprint()
    so, table = aot.paths(folder, fp)
    chosen, left = exports(calls)
    cc = CC(aot.module_name(fp))
    cc.target_cpu = "host"                        # NUMBA_CPU_NAME (e.g. generic) when set
    for symbol, _, func, sig in chosen:
        cc.export(symbol, sig)(func)
    with tempfile.TemporaryDirectory(prefix="offloadkit-aot-") as tmp:
        cc.output_dir = tmp
        cc.compile()
        for old in folder.glob(aot.PREFIX + "*"):
            old.unlink(missing_ok=True)
        shutil.move(os.path.join(tmp, cc.output_file), so)
    kernels: dict[str, list] = {}
    for symbol, kernel, _, sig in chosen:
        kernels.setdefault(kernel, []).append([symbol, [str(t) for t in sig.args]])
    table.write_text(json.dumps({"fingerprint": fp, "built": time.time(), "kernels": kernels}, indent=1))
    return so, left
