"""Run one lab experiment: build the topology, capture with tcpdump, run iperf3, clean up.

``run_lab(settings)`` returns a :class:`LabResult` with the measured goodput
and retransmissions (iperf3 --json), the capture files per point, tcpdump's
own counters (so a lossy capture is visible), and every command it ran.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..io.capture import read_capture
from . import safety
from .packets import read_headers
from .topology import IPERF_PORT, LabSettings, Topology

QUIET_S = 1.2   # > libpcap's 1 s ring-block timeout: every captured packet reaches the file


@dataclass
class LabResult:
    settings: LabSettings
    goodput_bps: float
    retransmits: int
    captures: dict[str, str]
    capture_stats: dict[str, dict]
    commands: list[str]
    sender_ip: str
    receiver_ip: str
    iperf: dict = field(repr=False, default_factory=dict)
    counters: dict = field(default_factory=dict)
    base_rtt_ns: int | None = None     # the idle path's RTT, when settings.measure_rtt

    @property
    def rtos(self) -> int:
        """Retransmission timeouts of the sender (its namespace's TcpExtTCPTimeouts)."""
        return int(self.counters.get("TcpExtTCPTimeouts", 0))

    @property
    def min_rtt_ns(self) -> int | None:
        """The smallest RTT sample iperf3 read from the sender's tcp_info (None if none)."""
        streams = self.iperf.get("end", {}).get("streams", [])
        rtts = [st["sender"]["min_rtt"] for st in streams if st.get("sender", {}).get("min_rtt")]
        return int(min(rtts) * 1000) if rtts else None

    def trace(self, point: str):
        """The capture at one point as a Trace (offloadkit.io when present, else dpkt)."""
        return load_trace(self.captures[point], point, self.sender_ip)

    def complete(self) -> bool:
        """Whether tcpdump kept every packet it was handed at every point."""
        return all(s.get("dropped", 0) == 0 and s.get("captured") == s.get("received")
                   for s in self.capture_stats.values())

    def to_dict(self) -> dict:
        return {"settings": self.settings.to_dict(), "goodput_bps": self.goodput_bps,
                "retransmits": self.retransmits, "captures": dict(self.captures),
                "capture_stats": self.capture_stats, "commands": list(self.commands),
                "sender_ip": self.sender_ip, "receiver_ip": self.receiver_ip,
                "rtos": self.rtos, "min_rtt_ns": self.min_rtt_ns, "base_rtt_ns": self.base_rtt_ns,
                "counters": dict(self.counters)}


def load_trace(path, point: str, sender_ip: str | None = None):
    """Read a capture with the kit's reader (``offloadkit.io.capture.read_capture``); a file
    it reads no packets from falls back to the lab's own dpkt reader."""
    res = read_capture(str(path))
    if res.ok and res.trace is not None:
        return res.trace.with_point(point)
    return read_headers(path, point, sender_ip)[0]


class _Procs:
    """Processes of one run: started with die-with-parent, always reaped."""

    def __init__(self, commands: list[str]):
        self.commands = commands
        self.procs: list[subprocess.Popen] = []

    def start(self, cmd: list[str], **kw) -> subprocess.Popen:
        self.commands.append(shlex.join(cmd))
        p = subprocess.Popen(cmd, preexec_fn=safety.die_with_parent, **kw)
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 3
        for p in self.procs:
            try:
                p.wait(max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"lab: timed out waiting for {what}")
        time.sleep(0.02)


def _tcpdump_stats(text: str) -> dict:
    stats = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit():
            if "captured" in line:
                stats["captured"] = int(parts[0])
            elif "received by filter" in line:
                stats["received"] = int(parts[0])
            elif "dropped by kernel" in line:
                stats["dropped"] = int(parts[0])
    return stats


def run_lab(settings: LabSettings, capture_dir: str | os.PathLike | None = None,
            tag: int | str | None = None) -> LabResult:
    """Run one experiment on the real kernel. Needs root; always removes what it made.

    Raises :class:`safety.LabUnavailable` (no root/namespaces/tools),
    :class:`safety.LabInterrupted` (SIGTERM/SIGINT; cleanup done) or
    RuntimeError (a command failed; cleanup done).
    """
    safety.check_available()
    safety.sweep()
    commands: list[str] = []
    if capture_dir:
        out_dir = Path(capture_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
    elif settings.captures:
        out_dir = Path(safety.temp_dir("captures"))  # the caller's; swept once this process is gone
    else:
        out_dir = Path(os.devnull)
    topo = Topology(settings, tag if tag is not None else safety.run_tag(), commands)
    procs = _Procs(commands)
    with safety.signals_raise():
        try:
            return _experiment(settings, topo, procs, out_dir)
        finally:
            with safety.signals_deferred():
                procs.stop_all()
                topo.destroy()


def _filter(settings: LabSettings) -> str:
    """tcpdump's filter: IPv4; or IPv6 without neighbour discovery and MLD (their late packets make
    tcpdump's counters race) -- not "ip6 and tcp", which misses BIG TCP packets (next header: HBH)."""
    return "ip6 and not icmp6 and not ip6 multicast" if settings.ip_version == 6 else "ip"


def _start_captures(settings: LabSettings, topo: Topology, procs: _Procs, out_dir: Path):
    captures, errfiles, dumps = {}, {}, {}
    for point in settings.captures:
        i = topo.ifaces[point]
        path = out_dir / f"{point}.pcap"
        err = out_dir / f".{point}.tcpdump.err"
        errfiles[point] = err
        cmd = ["ip", "netns", "exec", i.ns, "tcpdump", "-i", i.name, "-n", "-s", str(settings.snaplen),
               "-B", "8192", "-Z", "root", "-w", str(path), _filter(settings)]
        with open(err, "w") as ef:
            dumps[point] = procs.start(cmd, stdout=subprocess.DEVNULL, stderr=ef)
        captures[point] = str(path)
    for point, err in errfiles.items():
        _wait_for(lambda e=err, p=dumps[point]: "listening on" in e.read_text() or p.poll() is not None,
                  10, f"tcpdump on {point} to listen")
        if dumps[point].poll() is not None:
            raise RuntimeError(f"tcpdump on {point} failed: {err.read_text().strip()}")
    return captures, errfiles, dumps


def _stop_captures(dumps: dict, errfiles: dict) -> dict:
    """Let the last ring block reach the files, then stop tcpdump cleanly (SIGINT)."""
    time.sleep(QUIET_S)
    for p in dumps.values():
        p.send_signal(signal.SIGINT)
    stats = {}
    for point, p in dumps.items():
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        stats[point] = _tcpdump_stats(errfiles[point].read_text())
        errfiles[point].unlink(missing_ok=True)
    return stats


def _run_iperf(settings: LabSettings, topo: Topology, procs: _Procs) -> dict:
    rcv_ns = topo.ns["rcv"]
    server = procs.start(["ip", "netns", "exec", rcv_ns, "iperf3", "-s", "-1", "-B", topo.receiver_ip,
                          "-p", str(IPERF_PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def listening() -> bool:
        if server.poll() is not None:
            raise RuntimeError(f"iperf3 server failed: {server.stderr.read().decode().strip()}")
        out = subprocess.run(["ip", "netns", "exec", rcv_ns, "ss", "-Hltn", f"sport = :{IPERF_PORT}"],
                             capture_output=True, text=True).stdout
        return str(IPERF_PORT) in out

    _wait_for(listening, 10, "the iperf3 server to listen")
    cmd = ["ip", "netns", "exec", topo.ns["snd"], "iperf3", "-c", topo.receiver_ip,
           "-p", str(IPERF_PORT), "--json", "--connect-timeout", "5000", "-C", settings.cc]
    cmd += ["-n", str(settings.bytes)] if settings.bytes else ["-t", str(settings.duration_s)]
    if settings.mss:
        cmd += ["-M", str(settings.mss)]
    client = procs.start(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = client.communicate(timeout=settings.iperf_timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"iperf3 did not finish within {settings.iperf_timeout_s:g} s") from None
    try:
        report = json.loads(out.decode() or "{}")
    except json.JSONDecodeError:
        report = {}
    if client.returncode != 0 or "end" not in report or report.get("error"):
        raise RuntimeError(f"iperf3 failed: {report.get('error') or err.decode().strip()}")
    try:
        server.wait(5)
    except subprocess.TimeoutExpired:
        pass
    return report


#: the sender's SNMP counters a lab result keeps (``nstat`` names)
COUNTERS = ("TcpRetransSegs", "TcpOutSegs", "TcpExtTCPTimeouts", "TcpExtTCPLossProbes",
            "TcpExtTCPLostRetransmit", "TcpExtTCPSackRecovery", "TcpExtTCPMTUPFail", "TcpExtTCPMTUPSuccess",
            "TcpExtTCPSpuriousRTOs", "TcpExtTCPLossProbeRecovery")


def parse_snmp(text: str) -> dict[str, int]:
    """``/proc/net/snmp`` or ``/proc/net/netstat`` (header line, value line per group) as
    ``{"TcpExtTCPTimeouts": n, ...}``, the names ``nstat`` prints."""
    out: dict[str, int] = {}
    lines = text.splitlines()
    for head, vals in zip(lines[::2], lines[1::2]):
        group, names = head.split(":", 1)
        _, values = vals.split(":", 1)
        for n, v in zip(names.split(), values.split()):
            if v.lstrip("-").isdigit():
                out[group + n] = int(v)
    return out


def sender_counters(topo: Topology) -> dict[str, int]:
    """The sender namespace's TCP counters (a fresh namespace: they count this run only)."""
    text = "".join(topo.nsx(topo.ns["snd"], ["cat", f"/proc/net/{f}"]).stdout for f in ("snmp", "netstat"))
    allc = parse_snmp(text)
    return {k: allc[k] for k in COUNTERS if k in allc}


RTT_PORT = IPERF_PORT + 1
RTT_PINGS = 200
#: one-byte TCP ping-pong (TCP_NODELAY) over an idle path; prints the smallest round trip in ns
_PONG = ("import socket,sys\ns=socket.create_server((sys.argv[1],int(sys.argv[2])))\nprint('up',flush=True)\n"
         "c,_=s.accept()\nc.setsockopt(6,1,1)\nwhile (b:=c.recv(1)):\n c.sendall(b)\n")
_PING = ("import socket,sys,time\nc=socket.create_connection((sys.argv[1],int(sys.argv[2])),5)\n"
         "c.setsockopt(6,1,1)\nbest=1<<62\nfor _ in range(int(sys.argv[3])):\n t=time.perf_counter_ns()\n"
         " c.sendall(b'x')\n c.recv(1)\n best=min(best,time.perf_counter_ns()-t)\nprint(best)\n")


def base_rtt_ns(topo: Topology, procs: _Procs) -> int:
    """The idle path's round trip: the fastest of RTT_PINGS one-byte TCP ping-pongs (sender to
    receiver and back, through both stacks; the lab has no ping)."""
    server = procs.start(["ip", "netns", "exec", topo.ns["rcv"], sys.executable, "-c", _PONG, topo.receiver_ip,
                          str(RTT_PORT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if server.stdout.readline().strip() != "up":
        raise RuntimeError(f"the RTT echo server failed: {server.stderr.read().strip()}")
    p = topo.nsx(topo.ns["snd"], [sys.executable, "-c", _PING, topo.receiver_ip, str(RTT_PORT), str(RTT_PINGS)])
    server.wait(5)
    return int(p.stdout.strip())


def _experiment(settings: LabSettings, topo: Topology, procs: _Procs, out_dir: Path) -> LabResult:
    topo.build()
    rtt = base_rtt_ns(topo, procs) if settings.measure_rtt else None
    captures, errfiles, dumps = _start_captures(settings, topo, procs, out_dir)
    report = _run_iperf(settings, topo, procs)
    counters = sender_counters(topo)
    stats = _stop_captures(dumps, errfiles)
    end = report["end"]
    return LabResult(settings=settings,
                     goodput_bps=float(end.get("sum_received", {}).get("bits_per_second", 0.0)),
                     retransmits=int(end.get("sum_sent", {}).get("retransmits", 0) or 0),
                     captures=captures, capture_stats=stats, commands=topo.commands,
                     sender_ip=topo.sender_ip, receiver_ip=topo.receiver_ip,
                     iperf={"start": report.get("start", {}), "end": end}, counters=counters,
                     base_rtt_ns=rtt)
