"""Offline JavaScript for altair's JupyterChart: no CDN, ever.

``alt.JupyterChart.enable_offline()`` bundles vega-embed through vl-convert,
which takes 1-2 s. The bundle depends only on the altair and vl-convert
versions, so it is cached on disk (in ``__pycache__`` next to this file, or
``$OFFLOADKIT_CACHE_DIR``, or ``~/.cache/offloadkit``) and later kernels load it
in milliseconds. ``python -m offloadkit.warmup`` fills the cache.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import altair as alt

_CDN_IMPORT = re.compile(r"""(?:from|import)\s*\(?\s*["']https?://""")


def _cache_file() -> Path:
    import vl_convert
    name = f"jupyterchart-altair{alt.__version__}-vlc{vl_convert.__version__}.js"
    candidates = []
    if os.environ.get("OFFLOADKIT_CACHE_DIR"):
        candidates.append(Path(os.environ["OFFLOADKIT_CACHE_DIR"]))
    candidates += [Path(__file__).parent / "__pycache__", Path.home() / ".cache" / "offloadkit"]
    for folder in candidates:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK) or (folder / name).exists():
            return folder / name
    return candidates[-1] / name


def is_offline_bundle(src: str) -> bool:
    """True when an ES module imports nothing from the network."""
    return bool(src) and not _CDN_IMPORT.search(src)


def enable_offline() -> None:
    """Make every JupyterChart load its JavaScript from the kernel, not a CDN."""
    if alt.JupyterChart._is_offline:
        return
    path = _cache_file()
    try:
        src = path.read_text(encoding="utf-8")
    except OSError:
        src = ""
    if is_offline_bundle(src):
        alt.JupyterChart._esm = src
        alt.JupyterChart._is_offline = True
        return
    alt.JupyterChart.enable_offline()
    try:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(str(alt.JupyterChart._esm), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def warmup() -> None:
    """Build the cached bundle (called by ``python -m offloadkit.warmup``)."""
    enable_offline()
