"""Host CPU model: host profiles, per-stage cost charging, CPU-limited rate, perf-style profile.

A *path* (see :mod:`offloadkit.sim.host_paths`) runs the real engine functions
(GRO, LRO, checksum, software GSO) on a Trace of packets arriving at the host NIC
and reports, for every stage, what the stage saw: packets in and out, payload
bytes, other event counts (allocations, splice calls, ...) and the checksum
passes recorded by :mod:`offloadkit.engine.checksum`. This module turns those
counts into nanoseconds with a :class:`HostProfile` (data/hosts/*.json) and
derives cycles per second per stage, CPU utilisation per execution context, the
CPU-limited rate and a ``perf top``-shaped table.

Cost units (``per`` in the host files):
  packet   ns for each packet the stage sees;   byte  ns per payload byte it sees;
  <event>  ns per event counted by the path (``alloc``, ``call``, ``tx_skb``, ...);
  miss_line  a share (``weight``) of ``memory.miss_ns`` per cache line missed.
Checksum costs are charged only from recorded passes (``csum_bytes``), at
``csum_ns_per_byte``, to the symbol ``csum_partial``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from ..packet.jit import njit

from .. import codes
from ..trace import Trace

WIRE_EXTRA_BYTES = 24           # FCS 4 + preamble/SFD 8 + inter-frame gap 12
MAX_TCP_HEADER = 320            # room TCP keeps for headers when sizing GSO packets (4.x, 64-bit)
CSUM_SYMBOL = "csum_partial"


# ---------------------------------------------------------------- profiles
@dataclass(frozen=True)
class Cost:
    """One symbol's cost in one stage: ``value`` ns per unit ``per``."""
    symbol: str
    per: str
    value: float
    status: str = "estimated"      # "published" or "estimated"
    source: str = ""
    derivation: str = ""


@dataclass(frozen=True)
class StageSpec:
    name: str
    context: str
    costs: tuple[Cost, ...]


@dataclass(frozen=True)
class HostProfile:
    """A host's CPU costs as loaded from ``data/hosts/<name>.json``.

    Scalars (``clock_hz``, ``csum_ns_per_byte``, ``link_bps``, memory parameters)
    can be changed with :meth:`with_` to try knobs; ``constants`` keeps the file's
    value/source/derivation records for display.
    """
    name: str
    title: str
    report: str
    clock_hz: float
    cores: int
    perf_cpus: int
    link_bps: float
    csum_ns_per_byte: float
    contexts: dict
    stages: dict
    memory: dict = field(default_factory=dict)
    constants: dict = field(default_factory=dict)

    def with_(self, **changes) -> "HostProfile":
        """A copy with scalar or memory parameters changed, e.g. ``with_(cache_bytes=16e6)``."""
        mem = dict(self.memory)
        top = {}
        for k, v in changes.items():
            if k in mem:
                mem[k] = float(v)
            elif k in ("clock_hz", "csum_ns_per_byte", "link_bps"):
                top[k] = float(v)
            elif k in ("cores", "perf_cpus"):
                top[k] = int(v)
            else:
                raise ValueError(f"host {self.name!r} has no parameter {k!r}; "
                                 f"try one of {sorted(mem) + ['clock_hz', 'csum_ns_per_byte', 'link_bps', 'cores', 'perf_cpus']}")
            if float(v) < 0:
                raise ValueError(f"{k} must be >= 0, got {v}")
        return replace(self, memory=mem, **top)

    def scale_stage(self, stage: str, factor: float, per: str | None = None) -> "HostProfile":
        """A copy with every cost of ``stage`` (optionally only those per ``per``) multiplied."""
        if stage not in self.stages:
            raise ValueError(f"host {self.name!r} has no stage {stage!r}; it has {list(self.stages)}")
        if factor < 0:
            raise ValueError(f"a cost factor must be >= 0, got {factor}")
        spec = self.stages[stage]
        costs = tuple(replace(c, value=c.value * factor) if per in (None, c.per) else c for c in spec.costs)
        stages = dict(self.stages)
        stages[stage] = replace(spec, costs=costs)
        return replace(self, stages=stages)

    def constants_table(self):
        """Every constant with value, unit, published/estimated, source and derivation."""
        import pandas as pd
        rows = [dict(name=k, **v) for k, v in self.constants.items()]
        for spec in self.stages.values():
            for c in spec.costs:
                rows.append(dict(name=f"{spec.name}.{c.symbol}/{c.per}", value=c.value,
                                 unit=f"ns/{c.per}", status=c.status, source=c.source,
                                 derivation=c.derivation))
        return pd.DataFrame(rows, columns=["name", "value", "unit", "status", "source", "derivation"])


# ---------------------------------------------------------------- charging
@dataclass(frozen=True)
class StageRecord:
    """What one stage saw and what it cost over the whole input trace."""
    name: str
    context: str
    packets_in: int
    packets_out: int
    bytes_in: int
    counts: dict
    csum_bytes: int
    ns: dict                       # symbol -> ns over the trace

    @property
    def total_ns(self) -> float:
        return float(sum(self.ns.values()))


def charge(host: HostProfile, stage: str, *, packets_in: int, packets_out: int, bytes_in: int,
           counts: dict | None = None, csum_bytes: int = 0) -> StageRecord:
    """Charge one stage: every cost of the stage times the count of its unit.

    ``packet`` and ``byte`` counts are the packets and payload bytes the stage saw;
    other units must be given in ``counts``. ``csum_bytes`` are the bytes of the
    checksum passes recorded for this stage.
    """
    spec = host.stages.get(stage)
    if spec is None:
        raise ValueError(f"host {host.name!r} has no stage {stage!r}; it has {list(host.stages)}")
    n = {"packet": packets_in, "byte": bytes_in}
    n.update(counts or {})
    ns: dict[str, float] = {}
    for c in spec.costs:
        if c.per not in n:
            raise ValueError(f"stage {stage}: cost {c.symbol} is per {c.per!r} but the path counted "
                             f"only {sorted(n)}")
        ns[c.symbol] = ns.get(c.symbol, 0.0) + c.value * float(n[c.per])
    if csum_bytes:
        ns[CSUM_SYMBOL] = ns.get(CSUM_SYMBOL, 0.0) + host.csum_ns_per_byte * float(csum_bytes)
    return StageRecord(stage, spec.context, int(packets_in), int(packets_out), int(bytes_in),
                       dict(counts or {}), int(csum_bytes), ns)


def pass_bytes(passes, places) -> int:
    """Bytes of the recorded checksum passes at the given ``codes.PASS_*`` places."""
    if passes is None or len(passes.place) == 0:
        return 0
    lo, hi = int(passes.place.min()), int(passes.place.max())
    if lo == hi:                                   # the usual case: one producer, one place
        return int(passes.nbytes.sum()) if lo in places else 0
    mask = np.isin(passes.place, np.asarray(places, dtype=passes.place.dtype))
    return int(passes.nbytes[mask].sum())


# ---------------------------------------------------------------- results
@dataclass(frozen=True)
class CpuResult:
    """Cost of a path over one input trace, and the rates it implies.

    ``payload_bytes``/``wire_bytes`` describe the arriving trace; CPU time scales
    with the payload rate, so every figure can be evaluated at any ``rate_bps``
    (goodput, TCP payload bits per second). ``rate_bps`` defaults to the achieved
    rate: min(offered, link, CPU capacity).
    """
    path: str
    host: HostProfile
    stages: tuple[StageRecord, ...]
    payload_bytes: int
    wire_bytes: int
    offered_bps: float
    info: dict = field(default_factory=dict)
    traces: dict = field(default_factory=dict, repr=False, compare=False)   # capture point -> Trace

    # -- rates --------------------------------------------------------
    @property
    def link_goodput_bps(self) -> float:
        """Payload rate at which the link is full (wire overheads included)."""
        return self.host.link_bps * self.payload_bytes / max(self.wire_bytes, 1)

    def ns_per_byte(self, context: str | None = None) -> float:
        tot = sum(s.total_ns for s in self.stages if context in (None, s.context))
        return tot / max(self.payload_bytes, 1)

    @property
    def capacity_bps(self) -> dict:
        """Payload rate each context could carry with all its cores busy."""
        out = {}
        for ctx, cores in self.host.contexts.items():
            nspb = self.ns_per_byte(ctx)
            out[ctx] = float("inf") if nspb == 0 else cores * 8e9 / nspb
        return out

    @property
    def bottleneck(self) -> str:
        """The context that limits the rate, or ``"link"``/``"offered"``."""
        caps = self.capacity_bps
        ctx = min(caps, key=caps.get)
        limits = {"link": self.link_goodput_bps, ctx: caps[ctx], "offered": self.offered_bps}
        return min(limits, key=limits.get)     # ties go to the link, then the CPU

    @property
    def cpu_limited_bps(self) -> float:
        """min(link, CPU capacity): the rate when the sender offers as much as the link takes."""
        return min([self.link_goodput_bps] + list(self.capacity_bps.values()))

    @property
    def rate_bps(self) -> float:
        """Achieved goodput: min(offered, link, CPU capacity)."""
        return min(self.offered_bps, self.cpu_limited_bps)

    @property
    def wire_rate_bps(self) -> float:
        """The achieved rate counted in wire bits (frames, preamble and gap included)."""
        return self.rate_bps * self.wire_bytes / max(self.payload_bytes, 1)

    def utilisation(self, rate_bps: float | None = None) -> dict:
        """Busy fraction of each context's cores at a payload rate (default: achieved)."""
        r = self.rate_bps if rate_bps is None else rate_bps
        return {ctx: r / 8 * self.ns_per_byte(ctx) / 1e9 / cores
                for ctx, cores in self.host.contexts.items()}

    def cpu_utilisation(self, rate_bps: float | None = None) -> float:
        """Busy fraction of the whole host (all ``host.cores``)."""
        r = self.rate_bps if rate_bps is None else rate_bps
        return r / 8 * self.ns_per_byte() / 1e9 / self.host.cores

    def cycles_per_s(self, rate_bps: float | None = None) -> dict:
        """Cycles per second each stage spends at a payload rate (default: achieved)."""
        r = self.rate_bps if rate_bps is None else rate_bps
        scale = r / 8 / max(self.payload_bytes, 1) * self.host.clock_hz / 1e9
        return {s.name: s.total_ns * scale for s in self.stages}

    # -- tables -------------------------------------------------------
    def stage_table(self, rate_bps: float | None = None):
        import pandas as pd
        cyc = self.cycles_per_s(rate_bps)
        r = self.rate_bps if rate_bps is None else rate_bps
        rows = []
        for s in self.stages:
            cores = self.host.contexts[s.context]
            rows.append(dict(
                stage=s.name, context=s.context, packets_in=s.packets_in, packets_out=s.packets_out,
                bytes_in=s.bytes_in, csum_bytes=s.csum_bytes,
                ns_per_packet_in=s.total_ns / max(s.packets_in, 1),
                ns_per_kbyte=s.total_ns / max(self.payload_bytes, 1) * 1000,
                cycles_per_s=cyc[s.name],
                core_share=cyc[s.name] / self.host.clock_hz / cores,
                rate_bps=r))
        return pd.DataFrame(rows)

    def _cpus(self, cpus: int | None, context: str | None) -> int:
        if context is not None and context not in self.host.contexts:
            raise ValueError(f"no context {context!r}; this host has {list(self.host.contexts)}")
        if cpus is None:
            cpus = self.host.perf_cpus if context is None else self.host.contexts[context]
        return cpus

    def symbol_cycles(self, rate_bps: float | None = None, context: str | None = None) -> dict:
        """symbol -> [cycles per second, its stages, its contexts] at ``rate_bps`` (plain dicts:
        the live dashboards' path; :meth:`profile` is the same as a table)."""
        r = self.rate_bps if rate_bps is None else rate_bps
        scale = r / 8 / max(self.payload_bytes, 1) * self.host.clock_hz / 1e9
        out: dict = {}
        for s in self.stages:
            if context is not None and s.context != context:
                continue
            for sym, ns in s.ns.items():
                row = out.setdefault(sym, [0.0, {}, {}])
                row[0] += ns * scale
                row[1][s.name] = None
                row[2][s.context] = None
        return out

    def profile(self, rate_bps: float | None = None, cpus: int | None = None,
                context: str | None = None):
        """A ``perf top``-shaped table: symbol, stage, context, share of all sampled cycles.

        Shares are of ``cpus`` cores' cycles (default ``host.perf_cpus``, or the
        context's cores when ``context`` restricts the table to one thread, like
        ``perf top -C``/``-t``); cycles no stage spent appear as ``[idle/other]``.
        """
        import pandas as pd
        total = self.host.clock_hz * self._cpus(cpus, context)
        rows = [dict(symbol=sym, stage="+".join(st), context="+".join(cx), cycles_per_s=c)
                for sym, (c, st, cx) in self.symbol_cycles(rate_bps, context).items()]
        busy = sum(r["cycles_per_s"] for r in rows)
        rows.append(dict(symbol="[idle/other]", stage="", context="", cycles_per_s=max(total - busy, 0.0)))
        df = pd.DataFrame(rows)
        df["share"] = df.cycles_per_s / total
        return df.sort_values("cycles_per_s", ascending=False, ignore_index=True, kind="stable")

    def share(self, symbol: str, rate_bps: float | None = None, cpus: int | None = None,
              context: str | None = None) -> float:
        """``symbol``'s share in :meth:`profile`."""
        total = self.host.clock_hz * self._cpus(cpus, context)
        cyc = self.symbol_cycles(rate_bps, context)
        if symbol == "[idle/other]":
            return max(total - sum(c for c, _, _ in cyc.values()), 0.0) / total
        return cyc[symbol][0] / total if symbol in cyc else 0.0

    def compared_shares(self, measured: dict, rate_bps: float | None = None) -> dict[str, tuple[float, float]]:
        """symbol -> (measured share, model share) over the measured symbols (``{symbol: samples or %}``),
        both normalised over those symbols; a symbol the model lacks gets 0 (plain dicts: the live
        dashboards' path; :meth:`compare_profile` is the same as a table)."""
        if not measured:
            raise ValueError("give the measured profile as {symbol: samples or percent}")
        cyc = self.symbol_cycles(rate_bps)
        model = {s: float(cyc[s][0]) if s in cyc else 0.0 for s in measured}
        if "[idle/other]" in measured:
            busy = sum(c for c, _, _ in cyc.values())
            model["[idle/other]"] = max(self.host.clock_hz * self._cpus(None, None) - busy, 0.0)
        mt, st_ = sum(measured.values()), sum(model.values())
        return {s: (v / mt, model[s] / st_ if st_ else 0.0) for s, v in measured.items()}

    def compare_profile(self, measured: dict, rate_bps: float | None = None):
        """Set the model's profile beside a measured one (``{symbol: samples or %}``).

        Both are normalised over the measured symbols, so kerneltop sample counts
        and perf percentages compare alike; a symbol the model lacks gets 0.
        """
        import pandas as pd
        shares = self.compared_shares(measured, rate_bps)
        df = pd.DataFrame(dict(symbol=list(shares), measured_share=[m for m, _ in shares.values()],
                               model_share=[x for _, x in shares.values()]))
        df["measured_rank"] = df.measured_share.rank(ascending=False, method="min").astype(int)
        df["model_rank"] = df.model_share.rank(ascending=False, method="min").astype(int)
        return df

    def to_pandas(self, table: str = "stages", rate_bps: float | None = None):
        """``table="stages"`` (per-stage counts and cycles) or ``"profile"`` (perf-style)."""
        if table == "stages":
            return self.stage_table(rate_bps)
        if table == "profile":
            return self.profile(rate_bps)
        raise ValueError(f"table must be 'stages' or 'profile', got {table!r}")

    def summary(self) -> dict:
        return dict(path=self.path, host=self.host.name, rate_bps=self.rate_bps,
                    wire_rate_bps=self.wire_rate_bps, cpu_limited_bps=self.cpu_limited_bps,
                    link_goodput_bps=self.link_goodput_bps, bottleneck=self.bottleneck,
                    utilisation=self.utilisation(), **self.info)

    def __repr__(self) -> str:
        u = ", ".join(f"{k} {v:.0%}" for k, v in self.utilisation().items())
        return (f"<CpuResult {self.path} on {self.host.name}: {self.rate_bps / 1e6:.0f} Mb/s "
                f"({self.bottleneck}-limited), {u}>")


def conserved(result: CpuResult) -> bool:
    """True when each stage saw exactly the packets the previous stage delivered."""
    st = result.stages
    return all(st[i].packets_in == st[i - 1].packets_out for i in range(1, len(st)))


# ---------------------------------------------------------------- arrivals
def autosize_train(rate_bps: float, mss: int, flows: int, min_segs: int = 2) -> int:
    """Packets per sender burst: TSO autosizing, ~1 ms of the flow's rate, 2..64 KB.

    reports.md "Calibration constants", TSO autosizing (4.x): bytes = pacing_rate >> 10,
    segs = max(bytes / mss, tcp_min_tso_segs = 2), capped by gso_max_size.
    """
    cap = (65536 - 1 - MAX_TCP_HEADER) // mss
    per_flow_bytes_ms = rate_bps / max(flows, 1) / 8 / 1024
    return int(min(cap, max(min_segs, per_flow_bytes_ms // mss)))


def arrival_trace(rate_bps: float, mss: int = 1448, flows: int = 1, *, packets: int | None = None,
                  duration_ns: int | None = None, train_pkts: int | None = None, interleave: int = 1,
                  timestamps: bool = True, l2_bytes: int = 14, vlan: bool = False, vxlan: bool = False,
                  outer_udp_csum: int = 0, csum_state: int = codes.CSUM_NONE, csum_level: int = 0,
                  psh_end_of_train: bool = False) -> Trace:
    """Data packets arriving at a host NIC at ``rate_bps`` (wire bits/s, back to back).

    ``flows`` TCP flows send bursts (trains) of ``train_pkts`` MSS-sized segments
    (default :func:`autosize_train`); trains of different flows follow each other
    round-robin, and ``interleave`` trains at a time are mixed packet by packet
    (several senders behind one switch port). TCP timestamps (12 bytes of options)
    tick once per millisecond, as the kernel's do, so GRO sees option changes.
    ``vxlan`` adds the 50-byte outer headers (outer UDP checksum ``outer_udp_csum``,
    0 = none), ``vlan`` a 4-byte in-band tag. ``csum_state``/``csum_level`` are the
    receive checksum metadata the NIC attaches.
    """
    if mss <= 0:
        raise ValueError(f"MSS must be positive, got {mss}")
    if rate_bps <= 0:
        raise ValueError(f"rate must be positive, got {rate_bps} b/s")
    if flows < 1 or interleave < 1:
        raise ValueError("flows and interleave must be at least 1")
    opt = 12 if timestamps else 0
    l2 = l2_bytes + (4 if vlan else 0) + (codes.ENC_BYTES[codes.ENC_VXLAN] if vxlan else 0)
    ip_len = 20 + 20 + opt + mss
    wire = l2 + ip_len + WIRE_EXTRA_BYTES
    gap_ns = wire * 8 * 1e9 / rate_bps
    if packets is None:
        if duration_ns is None:
            raise ValueError("give packets= or duration_ns=")
        packets = int(duration_ns // gap_ns)
    if packets < 1:
        raise ValueError("the trace would be empty: raise duration_ns or packets")
    t = autosize_train(rate_bps, mss, flows) if train_pkts is None else int(train_pkts)
    if t < 1:
        raise ValueError(f"train_pkts must be >= 1, got {t}")
    n = packets
    idx = np.arange(n, dtype=np.int64)
    group_size = t * interleave
    group, r = np.divmod(idx, group_size)
    pos, lane = np.divmod(r, interleave)
    train = group * interleave + lane
    flow = (train % flows).astype(np.int32)
    # per-flow packet index (packets of one flow appear in index order)
    order = np.argsort(flow, kind="stable")
    counts = np.bincount(flow, minlength=flows)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    k = np.empty(n, dtype=np.int64)
    k[order] = np.arange(n) - np.repeat(starts, counts)
    time_ns = np.round(idx * gap_ns).astype(np.int64)
    flags = np.full(n, codes.ACK, dtype=np.uint16)
    if psh_end_of_train:
        flags[pos == t - 1] |= codes.PSH
    cols = dict(
        time_ns=time_ns, flow=flow, src_ip=(np.uint32(0xC6120001) + flow.astype(np.uint32)),
        dst_ip=np.uint32(0xC6130001), sport=(10000 + flow % 50000).astype(np.uint16),
        dport=np.uint16(5001), seq=((1000 + k * mss) & 0xFFFFFFFF).astype(np.uint32),
        ack=np.uint32(1), payload_len=np.int32(mss), flags=flags, window=np.uint16(1024),
        tcp_hlen=np.uint8(20 + opt), opt_ts=timestamps,
        tsval=(time_ns // 1_000_000 + 1).astype(np.uint32) if timestamps else np.uint32(0),
        tsecr=np.uint32(1 if timestamps else 0), ip_id=(k & 0xFFFF).astype(np.uint16),
        ip_len=np.int32(ip_len), l2_bytes=np.int16(l2),
        csum_state=np.uint8(csum_state), csum_level=np.uint8(csum_level))
    enc = 0
    if vlan:
        enc |= codes.ENC_VLAN
        cols["vlan_tci"] = np.int32(2)
    if vxlan:
        enc |= codes.ENC_VXLAN
        cols["vni"] = np.int32(99)
        cols["outer_udp_csum"] = np.int32(outer_udp_csum)
    cols["encap"] = np.uint8(enc)
    return Trace.from_columns(points=("nic",), meta=dict(rate_bps=float(rate_bps), mss=mss,
                                                         flows=flows, train_pkts=t,
                                                         interleave=interleave), **cols)


def trace_bytes(trace: Trace) -> tuple[int, int]:
    """(payload bytes, wire bytes incl. FCS/preamble/gap) of a trace."""
    payload = int(trace.payload_len.sum(dtype=np.int64))
    wire = int(trace.l2_bytes.sum(dtype=np.int64) + trace.ip_len.sum(dtype=np.int64)) \
        + WIRE_EXTRA_BYTES * len(trace)
    return payload, wire


# ---------------------------------------------------------------- kernels
@njit(cache=True)
def splice_calls(flow, payload, pipe_bytes, size_goal):
    """splice() calls and TCP skbs built by tcp_sendpage for skbs queued in this order.

    A proxy wakes once per run of consecutive skbs of one flow; each wake moves the
    run through a pipe of ``pipe_bytes`` (one call per pipe-full), and each call's
    data is sent with ``tcp_sendpage`` into skbs of at most ``size_goal`` bytes,
    pushed at the end of the call. Returns (calls, tx_skbs).
    """
    n = flow.shape[0]
    calls = 0
    skbs = 0
    i = 0
    while i < n:
        f = flow[i]
        run = 0
        while i < n and flow[i] == f:
            run += payload[i]
            i += 1
        while run > 0:
            chunk = run if run < pipe_bytes else pipe_bytes
            calls += 1
            skbs += (chunk + size_goal - 1) // size_goal
            run -= chunk
    return calls, skbs


def miss_fraction(sessions: int, cache_bytes: float, footprint_bytes: float) -> float:
    """Share of per-session memory touches that miss the cache: 1 - cache / working set."""
    ws = sessions * footprint_bytes
    if ws <= cache_bytes or ws == 0:
        return 0.0
    return 1.0 - cache_bytes / ws


def warmup() -> None:
    splice_calls(np.zeros(3, np.int32), np.full(3, 1448, np.int32), 65536, 65536)
