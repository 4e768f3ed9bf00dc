"""Where numba keeps the kit's compiled kernels, chosen before numba is imported.

numba writes ``cache=True`` kernels beside the package (``__pycache__``), else in
``~/.cache``. Two more cases are handled here, at ``import offloadkit``:

* a **shared cache** built ahead by ``offloadkit warmup --cache-dir DIR`` (an image or a
  JupyterHub install that students cannot write to). It is found at
  ``$OFFLOADKIT_NUMBA_CACHE``, else at ``<sys.prefix>/share/offloadkit/numba-cache``. numba
  needs a writable cache folder, so a read-only shared cache is copied once (a few MB) into
  the user's own cache folder, and numba is pointed there;
* nothing writable at all: a per-user folder in the temporary directory.

numba checks a cached kernel against its own source file only, so a cached caller
outlives a changed callee in another file (``loop.run_kernel`` kept the old
``sender.py``). In a checkout (the cache beside the package) every cached kernel is
dropped when a source file of the package that uses numba changed since the last import.

``NUMBA_CACHE_DIR``, when set, always wins.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

SHARED_ENV = "OFFLOADKIT_NUMBA_CACHE"
STAMP = "offloadkit-cache.txt"
SOURCES_STAMP = "offloadkit-sources.txt"
PACKAGE = Path(__file__).parent


def default_shared_dir() -> Path:
    """``<sys.prefix>/share/offloadkit/numba-cache``: where an image's prebuilt cache is looked for."""
    return Path(sys.prefix) / "share" / "offloadkit" / "numba-cache"


def shared_dir() -> Path | None:
    """The prebuilt shared cache, if there is one (it holds the stamp ``warmup`` writes)."""
    env = os.environ.get(SHARED_ENV)
    p = Path(env) if env else default_shared_dir()
    return p if (p / STAMP).is_file() else None


def _writable(path: Path) -> bool:
    return os.access(path, os.W_OK)


def _user_dir() -> Path:
    home_cache = Path(os.path.expanduser("~")) / ".cache"
    base = home_cache if _writable(home_cache if home_cache.is_dir() else home_cache.parent) else \
        Path(tempfile.gettempdir()) / f"offloadkit-{os.getuid()}"
    return base / "offloadkit" / "numba-cache"


def _copy_shared(src: Path) -> Path:
    """A writable copy of ``src`` in the user's cache folder, refreshed when the stamp changes."""
    dst = _user_dir()
    stamp = (src / STAMP).read_text()
    if not (dst / STAMP).is_file() or (dst / STAMP).read_text() != stamp:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
    return dst


def choose() -> str | None:
    """The folder to give numba as ``NUMBA_CACHE_DIR``, or None to keep numba's own choice."""
    if "NUMBA_CACHE_DIR" in os.environ:
        return None
    shared = shared_dir()
    if shared is not None:
        try:
            return str(shared if _writable(shared) else _copy_shared(shared))
        except OSError:
            pass
    if _writable(PACKAGE):
        return None
    home_cache = Path(os.path.expanduser("~")) / ".cache"
    if _writable(home_cache if home_cache.is_dir() else home_cache.parent):
        return None
    return str(Path(tempfile.gettempdir()) / f"offloadkit-numba-{os.getuid()}")


def aot_dir() -> Path:
    """Where ``warmup`` puts the kernels compiled ahead of time (``offloadkit.aot``): the numba
    cache folder when one is set (a shared cache carries them), else ``__pycache__`` beside
    the package when it is writable, else the user's cache folder."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    return PACKAGE / "__pycache__" if _writable(PACKAGE) else _user_dir()


IMPORTS_NUMBA = re.compile(rb"^[ \t]*(?:(?:from|import)[ \t]+numba\b|from[ \t]+(?:\.+|offloadkit\.)(?:packet\.)?jit[ \t]+import[ \t]+njit\b)",
                           re.MULTILINE)   # numba itself, or the kit's one njit (offloadkit.packet.jit)


def kernel_sources(package: Path = PACKAGE) -> tuple[tuple[str, str, str, str], ...]:
    """``(folder relative to package, name, path, sha1 of the content)`` of every ``.py`` file of
    ``package`` that imports numba or ``offloadkit.packet.jit``'s njit, in a fixed order (this package's
    walked once per process); a file that only names numba in its text, as a command's help
    does, is not a kernel source."""
    return _own_sources() if Path(package) == PACKAGE else _walk(Path(package))


@functools.cache
def _own_sources():
    return _walk(PACKAGE)


def _walk(package: Path) -> tuple[tuple[str, str, str, str], ...]:
    found = []
    for folder, subfolders, files in os.walk(package):
        subfolders[:] = sorted(d for d in subfolders if d not in ("data", "__pycache__"))
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                text = f.read()
            if IMPORTS_NUMBA.search(text):
                found.append((os.path.relpath(folder, package), name, path, hashlib.sha1(text).hexdigest()))
    return tuple(found)


def sources_fingerprint(package: Path = PACKAGE) -> str:
    """A digest of the relative path, size and modification time of every kernel source of
    ``package`` (the same whichever way the package was found on ``sys.path``)."""
    digest = hashlib.sha1()
    for where, name, path, _ in kernel_sources(Path(package)):
        st = os.stat(path)
        digest.update(f"{where} {name} {st.st_size} {st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def drop_stale_kernels(package: Path = PACKAGE) -> bool:
    """Delete the in-tree cached kernels when a source changed since the stamp; True if it did."""
    stamp = package / "__pycache__" / SOURCES_STAMP
    now = sources_fingerprint(package)
    try:
        if stamp.read_text() == now:
            return False
    except OSError:
        pass
    for cached in [*package.rglob("__pycache__/*.nbi"), *package.rglob("__pycache__/*.nbc")]:
        cached.unlink(missing_ok=True)
    try:
        stamp.parent.mkdir(exist_ok=True)
        stamp.write_text(now)
    except OSError:
        pass
    return True


def configure() -> None:
    """Set ``NUMBA_CACHE_DIR`` when :func:`choose` says so (call before numba is imported);
    in a checkout, drop kernels a changed source made stale."""
    chosen = choose()
    if chosen:
        os.environ["NUMBA_CACHE_DIR"] = chosen
    elif "NUMBA_CACHE_DIR" not in os.environ and _writable(PACKAGE):
        drop_stale_kernels()


def lean_import() -> None:
    """Import numba for a command-line run without two things it loads for other uses.

    numba imports ``coverage``, when installed, to report lines of jitted code to a running
    measurement (0.13 CPU-s), and its first kernel scans every installed package's entry
    points for numba extensions (0.05 s; the kit's kernels use none). A run that no
    coverage measurement watches skips both; ``coverage`` stays importable afterwards."""
    if "numba" in sys.modules:
        return
    hide = "coverage" not in sys.modules and "COVERAGE_PROCESS_START" not in os.environ
    if hide:
        sys.modules["coverage"] = None          # numba's coverage hook sees no coverage
    try:
        from numba.core import entrypoints
    finally:
        if hide:
            del sys.modules["coverage"]
    entrypoints._already_initialized = True     # numba's own flag: extensions "already" loaded


def write_stamp(cache_dir: Path, text: str) -> None:
    """Mark ``cache_dir`` as a complete shared cache (``warmup --cache-dir`` does this last)."""
    (cache_dir / STAMP).write_text(text)
