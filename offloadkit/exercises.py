"""Self-checking exercises for the notebooks: ``ids()``, ``answer(id)``, ``check(id, value)``.

Every expected answer is computed by the library when it is asked for (the
intro model, the report presets ``reports.get(id).run(...)``, the doctor), so a
model change can never leave a stale answer key. ``check`` compares a
student's answer with it, within a tolerance where the answer is a
measurement, and says what to look at when it is wrong::

    from offloadkit.exercises import check
    check("00-wire-frames", 45)      # -> Feedback: correct, or wrong with a hint
"""
from __future__ import annotations

import functools
import html
import math
from collections.abc import Callable
from dataclasses import dataclass

from . import reports
from .doctor import diagnose_file
from .engine.segment import mss_from_mtu
from .resources import data_dir
from .sim.one_packet import one_packet
from .ui.kernel_runs import EXPERIMENTS, stored

__all__ = ["NOTEBOOKS", "Exercise", "Feedback", "answer", "by_notebook", "check", "get", "ids"]

NOTEBOOKS = {
    "00": "00-offloads-101.ipynb", "01": "01-rtl8139-tso-mss.ipynb", "02": "02-mpls-gso.ipynb",
    "03": "03-vxlan-gro.ipynb", "04": "04-splice-sessions.ipynb", "05": "05-vlan-gro-nat.ipynb",
    "06": "06-your-own-capture.ipynb",
}


@dataclass(frozen=True)
class Exercise:
    """One checked question: ``compute()`` gives the expected answer; ``rel``/``abs`` the tolerance."""

    id: str
    question: str
    unit: str
    compute: Callable[[], object]
    hint: str
    rel: float = 0.0
    abs: float = 0.0

    @property
    def notebook(self) -> str:
        return NOTEBOOKS[self.id[:2]]


@dataclass(frozen=True)
class Feedback:
    """What ``check`` says: ``correct``, the ``message`` shown to the student."""

    id: str
    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{self.id}: {self.message}"

    def _repr_html_(self) -> str:
        colour, mark = ("#1a7f37", "&#10004;") if self.correct else ("#b35900", "&#10008;")
        return (f"<div class='offloadkit-feedback' style='color:{colour}'><b>{mark} {html.escape(self.id)}</b>: "
                f"{html.escape(self.message)}</div>")


# -- the models behind the answers (cached: a notebook asks each once) -------------------
@functools.cache
def _run(report: str, **knobs):
    return reports.get(report).run("broken", **knobs)


def _intro(**kw):
    return one_packet(**kw)


def _mode(counts: dict[int, int]) -> int:
    """The most common size of a size -> count table."""
    return max(counts, key=lambda s: (counts[s], s)) if counts else 0


def _largest_clean_mss(encap: str) -> int:
    """The largest MSS whose 14480-byte write crosses the hop with nothing dropped."""
    for mss in range(mss_from_mtu(1500), 500, -1):
        if len(_intro(mss=mss, payload=14480, encap=encap).dropped) == 0:
            return mss
    raise ValueError(f"no MSS from {mss_from_mtu(1500)} down to 501 crosses a {encap} hop")


def _kernel_mode(notebook: str, point: str, experiment: int = 0) -> int:
    """The most frequent payload at ``point`` in the stored kernel runs of one experiment (all runs pooled)."""
    label = list(EXPERIMENTS[notebook])[experiment]
    pooled: dict[int, int] = {}
    for run in stored(notebook)["experiments"][label]["runs"]:
        for size, n in run.get("kernel", {}).get(point, {}).items():
            if int(size) >= 64:
                pooled[int(size)] = pooled.get(int(size), 0) + n
    return _mode(pooled)


def _capture_finding(capture: str, point: str, kind: str):
    d = diagnose_file(data_dir() / "captures" / capture / f"{point}.pcap")
    found = [f for f in d.findings if f.kind == kind]
    if not found:
        raise ValueError(f"the doctor finds no {kind!r} in {capture}/{point}.pcap")
    return found[0]


_MB = 1e6
_EXERCISES = [
    # 00: the intro explorer
    Exercise("00-wire-frames", "Default settings, payload 64000: how many frames go on the wire?", "frames",
             lambda: len(_intro(payload=64000).sizes("wire")),
             "move the payload slider to 64000 and count the packets in the 'wire' trace (64000 / MSS, rounded up)"),
    Exercise("00-gro-packets", "Same setting: how many packets does the receiving stack handle with GRO on?",
             "packets", lambda: len(_intro(payload=64000).sizes("after GRO")),
             "look at the 'after GRO' capture point: GRO merges the wire frames before the stack sees them"),
    Exercise("00-pppoe-mss", "With the PPPoE encapsulation, what is the largest MSS that gets everything through?",
             "bytes", lambda: _largest_clean_mss("PPPoE"),
             "choose encapsulation PPPoE and lower the MSS slider until the 'after hop' trace loses nothing: "
             "PPPoE takes 8 of the 1500 bytes, and IP, TCP and the timestamp option take 52 more"),
    Exercise("00-kernel-router-out", "Section 7, run A on the real kernel: what payload do most segments carry "
             "after the router?", "bytes", lambda: _kernel_mode("00", "router-out"),
             "read the router-out line of run A in section 7 (the kernel's column): the router cut the "
             "super-packets at the MSS the clamp of 1452 gave"),
    # 01: rtl8139
    Exercise("01-fix-segment-size", "Tick the QEMU 7.2 fix: what TCP payload does every macvtap segment carry?",
             "bytes", lambda: _mode(_run("rtl8139", nic="hw-tso").result.segment_sizes("macvtap")),
             "tick 'QEMU 7.2 fix' and read the sizes at the 'macvtap' capture point (after the emulated NIC)"),
    Exercise("01-fix-throughput", "With the fix, what throughput does the model give, in KB/s?", "KB/s",
             lambda: _run("rtl8139", nic="hw-tso").goodput_bps / 8 / 1000,
             "tick 'QEMU 7.2 fix' and read the goodput in the readout", rel=0.05),
    Exercise("01-no-pppoe-throughput", "Fix unticked, PPPoE MTU 1500: what throughput, in KB/s?", "KB/s",
             lambda: _run("rtl8139", path_mtu=1500).goodput_bps / 8 / 1000,
             "untick the fix and move the 'PPPoE MTU' slider to 1500; read the goodput in the readout", rel=0.05),
    # 02: MPLS
    Exercise("02-broken-segments", "Defaults (TSO and GSO on): what payload do the packets that reach ns1 carry?",
             "bytes", lambda: _mode(_run("mpls").result.segment_sizes("ns1")),
             "look at the 'ns1' capture point: only one-segment packets survive the labelled route"),
    Exercise("02-fixed-segment-size", "Tick the Linux 4.9 fix: into what payload size are the GSO packets cut at ns0-out?",
             "bytes", lambda: _mode(_run("mpls", segmenter="sw-gso").result.segment_sizes("ns0-out")),
             "tick 'Linux 4.9 fix' and read the sizes at the 'ns0-out' capture point (route MTU minus 52)"),
    Exercise("02-gso-off-rate", "Untick TSO and GSO: what goodput does the model give, in Mb/s?", "Mb/s",
             lambda: _run("mpls", tso=False, gso=False).goodput_bps / _MB,
             "untick both 'TSO' and 'GSO' and read the goodput in the readout", rel=0.05),
    # 03: VXLAN
    Exercise("03-vouched-aggregate", "Tick 'NIC vouches for the inner checksum': how many payload bytes does the "
             "largest aggregate on the tap carry?", "bytes",
             lambda: int(_run("vxlan", rx_csum="unnecessary").info["tap_payload_max"]),
             "tick the inner-checksum control and read the largest size at the 'tap' capture point"),
    Exercise("03-gro-off-rate", "Inner checksum vouched for, GRO unticked: what rate does the model give, in Gb/s?",
             "Gb/s", lambda: _run("vxlan", rx_csum="unnecessary", gro=False).goodput_bps / 1e9,
             "untick 'GRO' with the inner checksum vouched for and read the rate in the readout", rel=0.05),
    # 04: splice
    Exercise("04-cliff", "Lower the sessions from 1000: from how many sessions does the proxy fall below line rate?",
             "sessions", lambda: reports.get("splice").cliff(),
             "move the 'sessions' slider down and watch the readout's rate and CPU load", rel=0.05),
    Exercise("04-lro-segs", "At 1000 sessions with LRO: how many segments does a received skb carry on average?",
             "segments", lambda: float(_run("splice").info["segments_per_skb"]),
             "read 'segments per received skb' in the readout, or compare the 'nic' and 'lro' sizes", abs=0.05),
    # 05: VLAN GRO and NAT
    Exercise("05-gro-on-rate", "Defaults (GRO on, no checksum offload): what NAT rate does the model give, in Mb/s?",
             "Mb/s", lambda: _run("vlan-nat").goodput_bps / _MB,
             "read the rate in the readout with the default controls", rel=0.03),
    Exercise("05-gro-off-rate", "GRO unticked, nf_conntrack_checksum on: what rate, in Mb/s?", "Mb/s",
             lambda: _run("vlan-nat", gro=False).goodput_bps / _MB,
             "untick 'GRO' (keep nf_conntrack_checksum ticked) and read the rate in the readout", rel=0.03),
    # 06: the doctor on a capture of your own
    Exercise("06-mss536-segment", "Pick the capture ts-mss536, point rcv: GRO merged the arriving segments; what "
             "payload did each wire segment carry?", "bytes",
             lambda: int(_capture_finding("ts-mss536", "rcv", "aggregation-ratio").evidence["segment_size"]),
             "pick ts-mss536/rcv and read the 'aggregation-ratio' finding: the aggregates are multiples "
             "of one segment size (iperf3 -M 536 minus 12 bytes of timestamps)"),
    Exercise("06-mss536-ratio", "Same capture: how many wire segments does one packet the receiver saw carry, "
             "on average?", "segments",
             lambda: float(_capture_finding("ts-mss536", "rcv", "aggregation-ratio").evidence["segments_per_packet"]),
             "read 'segments per packet' in the 'aggregation-ratio' finding of ts-mss536/rcv", rel=0.03),
    Exercise("06-gro-aggregate", "Pick ts-mtu1500, point rcv (GRO on): what is the largest payload the receiver's "
             "tcpdump saw in one packet?", "bytes",
             lambda: int(_capture_finding("ts-mtu1500", "rcv", "aggregates").evidence["largest_payload"]),
             "pick ts-mtu1500/rcv and read the 'aggregates' finding, or the largest bar of the sizes chart"),
]
_BY_ID = {e.id: e for e in _EXERCISES}


def ids(notebook: str | None = None) -> list[str]:
    """Every exercise id, or those of one notebook ("00" .. "06")."""
    return [e.id for e in _EXERCISES if notebook is None or e.id.startswith(notebook)]


def by_notebook() -> dict[str, list[str]]:
    """Notebook file name -> its exercise ids."""
    out: dict[str, list[str]] = {}
    for e in _EXERCISES:
        out.setdefault(e.notebook, []).append(e.id)
    return out


def get(exercise_id: str) -> Exercise:
    """The exercise (ValueError lists the ids)."""
    if exercise_id not in _BY_ID:
        raise ValueError(f"no exercise {exercise_id!r}; the exercises are {', '.join(_BY_ID)}")
    return _BY_ID[exercise_id]


@functools.cache
def answer(exercise_id: str):
    """The expected answer, computed now by the library."""
    value = get(exercise_id).compute()
    return int(value) if isinstance(value, (int,)) or float(value).is_integer() else float(value)


def _close(got: float, want: float, e: Exercise) -> bool:
    return abs(got - want) <= max(e.abs, e.rel * abs(want))


def check(exercise_id: str, value) -> Feedback:
    """Compare a student's ``value`` with :func:`answer`: correct, or wrong with a hint."""
    e = get(exercise_id)
    try:
        got = float(value)
    except (TypeError, ValueError):
        return Feedback(e.id, False, f"give a number in {e.unit}, not {value!r}. Hint: {e.hint}.")
    if math.isnan(got):
        return Feedback(e.id, False, f"give a number in {e.unit}. Hint: {e.hint}.")
    want = answer(e.id)
    if _close(got, want, e):
        return Feedback(e.id, True, f"correct: {_fmt(want)} {e.unit}.")
    side = "too high" if got > want else "too low"
    return Feedback(e.id, False, f"not quite: {_fmt(got)} {e.unit} is {side}. Hint: {e.hint}.")


def _fmt(x) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:,.4g}"
