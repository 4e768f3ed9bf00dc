"""The kit's kernels compiled ahead of time: found, checked and loaded without numba.

``offloadkit warmup`` records which kernels the capture verbs call from Python, with which
argument types, and builds them with numba's AOT compiler (``numba.pycc``) into one
extension module (``offloadkit.aot_build``). That module needs only numpy at run time, so
``gro``, ``segment`` and ``doctor`` start without importing numba (0.8 s, and 0.5 CPU-s
more for the first cached kernel).

The module is named after a :func:`fingerprint` of what it was built from (the content of
every kernel source, numba's, numpy's and Python's versions, the CPU), so a changed source
or another install finds none and the kit runs on numba as before. Beside it,
``<name>.json`` lists the exports: for each kernel (``module:qualname``) the argument types
(numba's names, e.g. ``array(uint8, 1d, C)``) of each compiled entry point.
``OFFLOADKIT_AOT=0`` ignores the module.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

from . import numba_cache

ENV = "OFFLOADKIT_AOT"
PREFIX = "offloadkit_aot_"
VERBS = ("gro", "segment", "doctor")   # recorded by warmup; they start without numba


def enabled() -> bool:
    """False when ``OFFLOADKIT_AOT=0``."""
    return os.environ.get(ENV, "1") != "0"


def cpu_name() -> str:
    """``NUMBA_CPU_NAME`` when set, else the CPU's model name and feature flags (Linux)."""
    if os.environ.get("NUMBA_CPU_NAME"):
        return os.environ["NUMBA_CPU_NAME"] + " " + os.environ.get("NUMBA_CPU_FEATURES", "")
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read().split("\n\n", 1)[0]
    except OSError:
        return platform.machine() + " " + platform.processor()
    keep = ("model name", "flags", "Features", "CPU part")
    return platform.machine() + "\n" + "\n".join(
        line for line in first.splitlines() if line.split(":", 1)[0].strip() in keep)


def _numba_version_file() -> bytes:
    spec = importlib.util.find_spec("numba")
    if spec is None or not spec.submodule_search_locations:
        return b"no numba"
    with open(os.path.join(list(spec.submodule_search_locations)[0], "_version.py"), "rb") as f:
        return f.read()


def fingerprint(package: Path = numba_cache.PACKAGE) -> str:
    """A digest of every kernel source's content, the numba, numpy and Python versions and the CPU."""
    digest = hashlib.sha1()
    for where, name, _, content in numba_cache.kernel_sources(Path(package)):
        digest.update(f"{where}/{name} {content}\n".encode())
    digest.update(_numba_version_file())
    digest.update(f"{np.__version__} {sys.version} {cpu_name()}".encode())
    return digest.hexdigest()[:20]


def module_name(fp: str) -> str:
    return PREFIX + fp


def paths(folder: Path, fp: str) -> tuple[Path, Path]:
    """The extension module and its export table for fingerprint ``fp`` in ``folder``."""
    name = module_name(fp)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return folder / (name + suffix), folder / (name + ".json")


def load(folder: Path | None = None) -> dict[str, list[tuple[tuple[str, ...], object]]] | None:
    """``{"module:qualname": [(argument types, entry point), ...]}`` from the module matching
    this install, or None (disabled, not built, stale, or it does not load)."""
    if not enabled():
        return None
    fp = fingerprint()
    so, table = paths(folder or numba_cache.aot_dir(), fp)
    if not (so.is_file() and table.is_file()):
        return None
    try:
        exports = json.loads(table.read_text())
        spec = importlib.util.spec_from_file_location(module_name(fp), so)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return {kernel: [(tuple(types), getattr(mod, symbol)) for symbol, types in entries]
                for kernel, entries in exports["kernels"].items()}
    except (OSError, ImportError, ValueError, KeyError, AttributeError) as e:
        print(f"offloadkit: ignoring the compiled kernels in {so} ({e}); using numba", file=sys.stderr)
        return None


_LAYOUT = {(True, True): "C", (True, False): "C", (False, True): "F", (False, False): "A"}


def arg_key(value) -> str | None:
    """The name numba's ``typeof`` gives ``value`` (``array(int64, 1d, C)``, ``int64``, ``bool``,
    ``float64``), for the argument types an entry point takes; None for any other kind."""
    t = type(value)
    if t is np.ndarray:
        f = value.flags
        name = f"array({value.dtype.name}, {value.ndim}d, {_LAYOUT[f.c_contiguous, f.f_contiguous]})"
        return name if f.writeable else "readonly " + name     # numba's typeof ignores alignment
    if t is bool:
        return "bool"
    if t is int:
        return "int64" if -2**63 <= value < 2**63 else None
    if t is float:
        return "float64"
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return value.dtype.name
    return None


SCALARS = frozenset(["bool", "float64", "float32", *(f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64))])


def exportable(type_name: str) -> bool:
    """True for the argument type names :func:`arg_key` gives (arrays of plain numbers, scalars)."""
    if type_name in SCALARS:
        return True
    inner = type_name.removeprefix("readonly ")
    if not inner.startswith("array(") or not inner.endswith(")"):
        return False
    dtype, ndim, layout = inner[6:-1].split(", ")
    return dtype in SCALARS and ndim.endswith("d") and layout in ("C", "F", "A")
