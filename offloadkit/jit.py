"""The one ``njit`` of the kit's kernel modules (``from ..jit import njit``).

It is ``numba.njit`` with the same arguments. Kernel modules import it from here, not
from numba, so that one place decides how a kernel is built (see ``offloadkit.aot`` for
the kernels compiled ahead of time).
"""
from __future__ import annotations


def njit(*args, **options):
    """``numba.njit(*args, **options)``: a decorator (or, given a function, its dispatcher)."""
    import numba
    return numba.njit(*args, **options)
