"""Where numba keeps the kit's compiled kernels, chosen before numba is imported.

numba writes ``cache=True`` kernels beside the package (``__pycache__``), else in
``~/.cache``. Two more cases are handled here, at ``import offloadkit``:

* a **shared cache** built ahead by ``offloadkit warmup --cache-dir DIR`` (an image or a
  JupyterHub install that students cannot write to). It is found at
  ``$OFFLOADKIT_NUMBA_CACHE``, else at ``<sys.prefix>/share/offloadkit/numba-cache``. numba
  needs a writable cache folder, so a read-only shared cache is copied once (a few MB) into
  the user's own cache folder, and numba is pointed there;
* nothing writable at all: a per-user folder in the temporary directory.

``NUMBA_CACHE_DIR``, when set, always wins.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

SHARED_ENV = "OFFLOADKIT_NUMBA_CACHE"
STAMP = "offloadkit-cache.txt"


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
    if _writable(Path(__file__).parent):
        return None
    home_cache = Path(os.path.expanduser("~")) / ".cache"
    if _writable(home_cache if home_cache.is_dir() else home_cache.parent):
        return None
    return str(Path(tempfile.gettempdir()) / f"offloadkit-numba-{os.getuid()}")


def configure() -> None:
    """Set ``NUMBA_CACHE_DIR`` when :func:`choose` says so (call before numba is imported)."""
    chosen = choose()
    if chosen:
        os.environ["NUMBA_CACHE_DIR"] = chosen


def write_stamp(cache_dir: Path, text: str) -> None:
    """Mark ``cache_dir`` as a complete shared cache (``warmup --cache-dir`` does this last)."""
    (cache_dir / STAMP).write_text(text)
