"""Safety rails of the kernel lab: privilege check, name prefix, sweep, signals.

Everything the lab creates carries the prefix ``okl``: namespaces are named
``okl-<pid>-<start>-<role>`` (the pid of the Python process that made them and
that process's start time in clock ticks since boot, ``/proc/<pid>/stat`` field
22, so a recycled pid is not taken for the owner), and interfaces only ever
exist inside those namespaces. A sweep deletes the namespaces of lab runs whose
process is gone (or, with ``everything=True``, every ``okl-`` namespace) after
killing the processes inside them; it never touches anything without the prefix.
Names without ``<start>`` (``okl-<pid>-<role>``) are judged by the pid alone.
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile

PREFIX = "okl"
NS_RE = re.compile(rf"^{PREFIX}-(\d+)-(?:(\d+)-)?[a-z0-9]+$")
REFUSAL = ("The kernel lab needs root and network namespaces (ip netns); "
           "on Binder it cannot run.")
#: Set to 1 to make the capability check fail as if the lab could not run (for tests).
FORCE_REFUSE_ENV = "OFFLOADKIT_LAB_FORCE_REFUSE"
TOOLS = ("ip", "ethtool", "tc", "iptables", "iperf3", "tcpdump")


class LabUnavailable(RuntimeError):
    """The lab cannot run here (no root, no namespaces or a missing tool)."""


class LabInterrupted(KeyboardInterrupt):
    """SIGTERM/SIGINT/SIGHUP arrived during a lab run; cleanup has run."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


def check_available() -> None:
    """Raise :class:`LabUnavailable` with one clear sentence unless the lab can run."""
    if os.environ.get(FORCE_REFUSE_ENV, "") not in ("", "0"):
        raise LabUnavailable(REFUSAL)
    if os.geteuid() != 0 or not os.path.exists("/proc/self/ns/net") or not shutil.which("ip"):
        raise LabUnavailable(REFUSAL)
    missing = [t for t in TOOLS if not shutil.which(t)]
    if missing:
        raise LabUnavailable(f"The kernel lab needs {', '.join(missing)} installed "
                             f"(Debian: apt-get install iproute2 ethtool iptables iperf3 tcpdump).")


def available() -> bool:
    """Whether the lab can run here (:func:`check_available` raises nothing)."""
    try:
        check_available()
        return True
    except LabUnavailable:
        return False


def ns_name(tag: int | str, role: str) -> str:
    """The namespace name for one role of a lab run, e.g. ``okl-1234-snd``."""
    name = f"{PREFIX}-{tag}-{role}"
    if not NS_RE.match(name):
        raise ValueError(f"bad lab namespace name {name!r}")
    return name


def lab_namespaces() -> list[str]:
    """Names of existing namespaces that carry the lab's prefix."""
    try:
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if NS_RE.match(n)]


def start_ticks(pid: int) -> int | None:
    """A process's start time (clock ticks since boot, /proc/<pid>/stat field 22), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def run_tag(pid: int | None = None) -> str:
    """``<pid>-<start>``: what names a lab run's namespaces and temp folders."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}-{start_ticks(pid) or 0}"


def owner_alive(pid: int, start: int | None) -> bool:
    """Whether the process that made a lab name is still there (same pid AND start time)."""
    if start is None:
        return _alive(pid)
    return start_ticks(pid) == start


def _owner(match: re.Match) -> tuple[int, int | None]:
    return int(match.group(1)), None if match.group(2) is None else int(match.group(2))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ns_pids(ns: str) -> list[int]:
    try:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(p) for p in out.split() if p.isdigit()]


def kill_ns_processes(ns: str) -> None:
    """SIGKILL every process inside a lab namespace (only ``okl-`` ones)."""
    if not NS_RE.match(ns):
        raise ValueError(f"refusing to touch namespace {ns!r}: not the lab's")
    me = os.getpid()
    for pid in ns_pids(ns):
        if pid != me:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def delete_namespace(ns: str, commands: list[str] | None = None) -> None:
    """Kill what runs inside a lab namespace and delete it (its veths go with it)."""
    kill_ns_processes(ns)
    cmd = ["ip", "netns", "del", ns]
    if commands is not None:
        commands.append(shlex.join(cmd))
    subprocess.run(cmd, capture_output=True, timeout=20)


TMP_RE = re.compile(rf"^{PREFIX}-(?:captures|compare)-(\d+)-(?:(\d+)-)?[A-Za-z0-9_]+$")


def temp_dir(kind: str) -> str:
    """A fresh temporary directory ``okl-<kind>-<pid>-<start>-*`` (swept once its owner is gone)."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}-{kind}-{run_tag()}-")


@contextlib.contextmanager
def scratch_dir(kind: str):
    """A :func:`temp_dir` removed on the way out, with signals held while it is removed
    (a SIGTERM that arrives then is delivered after, as :class:`LabInterrupted`)."""
    path = temp_dir(kind)
    try:
        yield path
    finally:
        with signals_deferred():
            shutil.rmtree(path, ignore_errors=True)


def sweep_temp(everything: bool = False) -> list[str]:
    """Remove the temp folders of gone lab runs (all with ``everything``); returns their paths."""
    removed = []
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        m = TMP_RE.match(name)
        if m and (everything or not owner_alive(*_owner(m))):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
            removed.append(os.path.join(root, name))
    return removed


def sweep(everything: bool = False) -> list[str]:
    """Remove leftovers of crashed lab runs; returns what was removed.

    Only namespaces named ``okl-<pid>-<role>`` are considered. By default a
    namespace is removed only if the process ``<pid>`` that created it is gone,
    so a sweep never breaks a lab run in progress; ``everything=True`` removes
    them all. Temporary capture folders ``okl-captures-<pid>-*`` of gone
    processes are removed too. An owner is the pid *and* its start time, so a
    leftover whose pid was recycled by another process is still recognised.
    """
    removed = []
    me = (os.getpid(), start_ticks(os.getpid()))
    for ns in lab_namespaces():
        owner = _owner(NS_RE.match(ns))
        if everything or (owner[0] == me[0] and owner[1] in (None, me[1])) or not owner_alive(*owner):
            delete_namespace(ns)
            removed.append(ns)
    return removed + sweep_temp(everything)


_CAUGHT = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@contextlib.contextmanager
def signals_raise():
    """Turn SIGTERM/SIGINT/SIGHUP into :class:`LabInterrupted` inside the block,
    so ``finally`` clauses (the cleanup) run. Outside the main thread it does nothing."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise LabInterrupted(signum)

    old = {s: signal.signal(s, handler) for s in _CAUGHT}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def signals_deferred():
    """Hold SIGTERM/SIGINT/SIGHUP while cleaning up; re-deliver the first one after."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    old = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in _CAUGHT}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if pending:
            raise LabInterrupted(pending[0])


def die_with_parent() -> None:
    """preexec_fn for lab children: SIGKILL them if the lab process dies (even by SIGKILL)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
