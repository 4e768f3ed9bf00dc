"""offloadkit: see what TSO/GSO, GRO/LRO and checksum offload do to TCP.

The engine (``offloadkit.engine``) turns a Scenario into traces at named
capture points; ``offloadkit.io`` reads and writes captures and tcpdump text;
``offloadkit.reports`` reproduces five real netdev reports.
"""
import os
import tempfile


def _numba_cache_fallback() -> None:
    """Give numba a writable cache folder when neither the package folder nor
    ~/.cache is writable (an unprivileged user on a system-wide install);
    otherwise ``cache=True`` kernels fail to import."""
    if "NUMBA_CACHE_DIR" in os.environ or os.access(os.path.dirname(__file__), os.W_OK):
        return
    home_cache = os.path.join(os.path.expanduser("~"), ".cache")
    if os.access(home_cache if os.path.isdir(home_cache) else os.path.expanduser("~"), os.W_OK):
        return
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"offloadkit-numba-{os.getuid()}")


_numba_cache_fallback()

from .trace import Trace  # noqa: E402

__all__ = ["Trace", "sweep"]


def __getattr__(name):
    if name == "sweep":                     # imported on first use: it brings pandas and dask
        import importlib
        return importlib.import_module(".sweep", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
__version__ = "0.1.0"
