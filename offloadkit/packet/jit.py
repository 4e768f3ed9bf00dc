"""The one ``njit`` of the kit's kernel modules (``from ..packet.jit import njit``; it sits on the
lowest floor that holds kernels, so every floor above takes it by a downward import).

Without a compiled module for this install (see ``offloadkit.aot``), or with
``OFFLOADKIT_AOT=0``, it is ``numba.njit`` with the same arguments.

With one, ``njit`` returns a :class:`Kernel` for every kernel, and numba is not imported.
A call whose argument types the module exports for that kernel runs the compiled entry
point. Any other call (a kernel or argument types not exported) imports numba then and
runs the kernel's real dispatcher (``numba.njit`` with the kernel's own options and its
on-disk cache); numba sees every :class:`Kernel` as that dispatcher, so kernels calling
kernels compile as in numba mode. A kernel never runs as plain Python.
``OFFLOADKIT_DEBUG=1`` prints one line on stderr for each kernel that fell back.
"""
from __future__ import annotations

import inspect
import os
import sys

from .. import aot, numba_cache

DEBUG_ENV = "OFFLOADKIT_DEBUG"
EXPORTS = aot.load()     # None: numba mode
FALLBACKS: list[str] = []  # "module:qualname (argument types)" of each kernel that fell back


def njit(*args, **options):
    """``numba.njit(*args, **options)``, or in AOT mode the same signature returning :class:`Kernel`."""
    if EXPORTS is None:
        import numba
        return numba.njit(*args, **options)
    if args and callable(args[0]):
        return Kernel(args[0], options)
    if args:
        raise TypeError("offloadkit.packet.jit.njit: give options by keyword, signatures are chosen by warmup")
    return lambda func: Kernel(func, options)


def kernel_key(func) -> str:
    """``module:qualname``: how the export table names a kernel."""
    return f"{func.__module__}:{func.__qualname__}"


class Kernel:
    """A kernel in AOT mode: compiled entry points by argument types, numba for the rest."""

    def __init__(self, func, options: dict):
        self.py_func = func
        self.options = options
        self.__name__, self.__qualname__ = func.__name__, func.__qualname__
        self.__module__, self.__doc__, self.__wrapped__ = func.__module__, func.__doc__, func
        self.entries = dict(EXPORTS.get(kernel_key(func), ()))
        self.nargs = func.__code__.co_argcount
        self._dispatcher = None

    def __repr__(self) -> str:
        return f"<offloadkit kernel {kernel_key(self.py_func)}: {len(self.entries)} compiled entry point(s)>"

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != self.nargs:
            bound = inspect.signature(self.py_func).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, {}
        types = tuple(map(aot.arg_key, args))
        entry = self.entries.get(types)
        if entry is not None:
            return entry(*args)
        return self.dispatcher(types)(*args)

    def dispatcher(self, why=None):
        """numba's dispatcher for this kernel (numba imported on the first call of any)."""
        if self._dispatcher is None:
            numba = _numba()
            self._dispatcher = numba.njit(**self.options)(self.py_func)
            note = f"{kernel_key(self.py_func)} ({', '.join(map(str, why)) if why else 'from another kernel'})"
            FALLBACKS.append(note)
            if os.environ.get(DEBUG_ENV, "0") not in ("", "0"):
                print(f"offloadkit: no compiled entry point for {note}: numba", file=sys.stderr)
        return self._dispatcher

    def __getattr__(self, name):          # .signatures, .overloads, ...: the dispatcher's
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.dispatcher(), name)


def _numba():
    """numba, imported as a command-line run does it, with every :class:`Kernel` typed as its dispatcher."""
    if "numba" not in sys.modules:
        numba_cache.lean_import()
    import numba
    from numba.core.typing.typeof import typeof_impl
    if Kernel not in typeof_impl.registry:
        typeof_impl.register(Kernel)(lambda kernel, c: typeof_impl(kernel.dispatcher(), c))
    return numba
