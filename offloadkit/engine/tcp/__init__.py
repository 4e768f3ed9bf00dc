"""Event-driven TCP flows, socket to socket through the offload engine (numba).

One njit event loop (``run_kernel``) over plain arrays: a binary heap of events
(hop events queued per hop behind it), packet and ACK pools, a per-flow
scoreboard ring of MSS units. Split as ns-3 splits its TCP
(TcpCongestionOps / TcpRecoveryOps), imports pointing down:
``loop`` -> ``sender`` -> ``recovery`` -> ``congestion`` -> ``world`` ->
``layout``, with ``receiver`` and ``hops`` beside the sender. Each module's
docstring says what it models (spec §1-§3). ``offloadkit.sim`` packs a
Scenario into these arrays and turns the recorded rows into Traces.

Not modelled: the handshake (connections start established, srtt = base RTT),
FIN, receive-window autotuning, TSQ/pacing of the sender, TSO deferral, ACK
loss and reverse-path queueing, D-SACK undo, HyStart's ACK-train detection.
"""
from . import layout
from .layout import *  # noqa: F403  the slot names (P_*, G_*, F_*, R_* ...)
from .loop import run_kernel
from .world import World, make_world, seed_words, sizes, world_bytes

__all__ = [n for n in dir(layout) if n.isupper()] + ["World", "make_world", "run_kernel", "seed_words", "sizes",
                                                      "world_bytes"]
