"""Offline JavaScript for the charts (LiveChart, altair's JupyterChart): no CDN, ever.

vl-convert bundles vega-embed with a widget's JavaScript, which takes 1-2 s. A
bundle depends only on its source and the altair, vl-convert and Vega-Lite
versions, so it is cached on disk (in ``__pycache__`` next to this file, or
``$OFFLOADKIT_CACHE_DIR``, or ``~/.cache/offloadkit``) and later kernels load it
in milliseconds, without importing altair or vl-convert (the versions come from
the installed packages' metadata). ``python -m offloadkit.warmup`` fills the cache.
"""
from __future__ import annotations

import hashlib
import os
import re
from importlib.metadata import version
from pathlib import Path

# The Vega-Lite of every spec the kit writes (altair's SCHEMA_URL; tests/ui checks they agree)
VEGA_LITE_VERSION = "6.4.1"
SCHEMA_URL = f"https://vega.github.io/schema/vega-lite/v{VEGA_LITE_VERSION}.json"

_CDN_IMPORT = re.compile(r"""(?:from|import)\s*\(?\s*["']https?://""")


def _cache_file(name: str, src: str) -> Path:
    digest = hashlib.sha256(f"{VEGA_LITE_VERSION}\n{src}".encode()).hexdigest()[:12]
    name = f"{name}-altair{version('altair')}-vlc{version('vl-convert-python')}-{digest}.js"
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


def bundle(src: str, name: str) -> str:
    """``src`` (a JupyterChart ES module that imports vega-embed from a CDN) as a self-contained
    bundle, as ``JupyterChart.enable_offline`` builds it: the leading import lines dropped, the
    rest bundled by ``vl_convert.javascript_bundle``. Cached on disk by name, versions and source."""
    path = _cache_file(name, src)
    try:
        cached = path.read_text(encoding="utf-8")
    except OSError:
        cached = ""
    if is_offline_bundle(cached):
        return cached
    import vl_convert
    lines = src.split("\n")
    while lines and (not lines[0].strip() or lines[0].startswith(("import", "//"))):
        lines.pop(0)
    out = vl_convert.javascript_bundle("\n".join(lines), vl_version="v" + "_".join(VEGA_LITE_VERSION.split(".")[:2]))
    try:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(out, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    return out


def enable_offline() -> None:
    """Make every altair JupyterChart load its JavaScript from the kernel, not a CDN (imports altair)."""
    import altair as alt
    if alt.JupyterChart._is_offline:
        return
    from altair.jupyter.jupyter_chart import load_js_src
    alt.JupyterChart._esm = bundle(load_js_src(), "jupyterchart")
    alt.JupyterChart._is_offline = True


def warmup() -> None:
    """Build altair's cached bundle (called by ``python -m offloadkit.warmup``)."""
    enable_offline()
