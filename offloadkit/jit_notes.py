"""Say on stderr when numba compiles a kernel (a cache miss), and how long it took.

A fresh install compiles the kit's kernels on first use: 30-70 s of silence otherwise.
:func:`watch_compiles` (a context manager) listens to numba's ``numba:compile`` event, which numba fires only
when a kernel is not in the on-disk cache; it prints one line when the first compile
starts and, from :meth:`CompileWatch.summary`, one line with the count and time.
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager

from numba.core import event

FIRST_LINE = ("offloadkit: compiling numba kernels on first use (once per install and CPU, "
              "usually 30-70 s; `offloadkit warmup` does it ahead) ...")


class CompileWatch(event.Listener):
    """A numba event listener counting top-level kernel compiles and their wall time."""

    def __init__(self, stream=None, quiet: bool = False):
        self.stream = stream      # None: sys.stderr at the time of printing
        self.quiet = quiet
        self.compiled = 0
        self.seconds = 0.0
        self._depth = 0
        self._t0 = 0.0

    def on_start(self, event) -> None:
        if self._depth == 0:
            self._t0 = time.perf_counter()
            if self.compiled == 0 and not self.quiet:
                print(FIRST_LINE, file=self.stream or sys.stderr, flush=True)
        self._depth += 1

    def on_end(self, event) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.compiled += 1
            self.seconds += time.perf_counter() - self._t0

    def summary(self) -> str | None:
        """One line when anything compiled, else None."""
        if not self.compiled:
            return None
        return (f"offloadkit: compiled {self.compiled} kernel(s) in {self.seconds:.1f} s; "
                "later runs load them from numba's cache")


@contextmanager
def watch_compiles(stream=None, quiet: bool = False):
    """A :class:`CompileWatch` registered with numba for the duration of the ``with`` block."""
    watch = CompileWatch(stream, quiet)
    with event.install_listener("numba:compile", watch):
        yield watch
