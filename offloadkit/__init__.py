"""offloadkit: see what TSO/GSO, GRO/LRO and checksum offload do to TCP.

The engine (``offloadkit.engine``) turns a Scenario into traces at named
capture points; ``offloadkit.io`` reads and writes captures and tcpdump text;
``offloadkit.reports`` reproduces five real netdev reports.
"""
from .trace import Trace

__all__ = ["Trace"]
__version__ = "0.1.0"
