"""The kernel lab: settings, refusal without privileges, and cleanup after SIGTERM/SIGKILL."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from offloadkit.lab import REFUSAL, LabSettings, safety
from offloadkit.lab.runner import _tcpdump_stats
from offloadkit.units import parse_size

ROOT = Path(__file__).resolve().parents[2]


kernel = pytest.mark.kernel
needs_lab = pytest.mark.skipif(not safety.available(), reason="needs root, ip netns, iperf3 and tcpdump")


def _offloadkit(*args, env=None, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", "offloadkit", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env, **kw)


# -- settings ------------------------------------------------------------------
@pytest.mark.parametrize("kw, words", [
    (dict(mss=1600), "MSS 1600 does not fit"),
    (dict(mss=9000, mtu=9000), "MSS 9000 does not fit"),
    (dict(mtu=100), "mtu 100 is out of range"),
    (dict(rate="fast"), "cannot read rate"),
    (dict(rate="0bit"), "rate 0 bit/s is out of range"),
    (dict(rate="1Mbit", queue="100"), "queue 100 bytes is out of range"),
    (dict(queue="64KB"), "give --rate-limit too"),
    (dict(delay="10 ms"), "write it like 10ms"),
    (dict(loss="often"), "cannot read"),
    (dict(loss="90%"), "too high"),
    (dict(loss="1.5"), "1.5"),
    (dict(duration_s=2), "not both"),
    (dict(bytes=None, duration_s=0), "more than 0 s"),
    (dict(bytes=None, duration_s="0s"), "more than 0 s"),
    (dict(bytes=None, duration_s=-5.0), "more than 0 s"),
    (dict(bytes=None, duration_s=float("nan")), "more than 0 s"),
    (dict(bytes=None, duration_s="nan"), "cannot read time"),
    (dict(bytes=None, duration_s=7200), "at most 3600 s"),
    (dict(mtu_probing=3), "tcp_mtu_probing is 0, 1 or 2"),
    (dict(blackhole_mtu=1400, path_mtu=1300), "drop --path-mtu"),
    (dict(topology="direct", drop_gso=True, captures=("snd", "rcv")), "router topology"),
    (dict(bytes=None), "not both"),
    (dict(topology="direct", clamp=1452), "router topology"),
    (dict(topology="direct"), "do not exist in the direct topology"),
    (dict(bytes="4Q"), "cannot read size"),
    (dict(snaplen=40), "cuts TCP headers"),
])
def test_settings_reject_bad_input_with_a_sentence(kw, words):
    with pytest.raises(ValueError, match=words):
        LabSettings(**kw)


@pytest.mark.parametrize("kw", [
    dict(), dict(timestamps=False), dict(mss=536), dict(mss=1000, timestamps=False),
    dict(clamp=1452, path_mtu=1492), dict(path_mtu=1492), dict(mtu=9000), dict(mtu=9000, clamp=1300),
])
def test_expected_payload_is_the_kernel_formula(kw):
    s = LabSettings(**kw)
    mtu = min(s.mtu, s.path_mtu or s.mtu)
    caps = [c for c in (s.mss, s.clamp) if c] + [mtu - 40]
    assert s.expected_payload() == min(caps) - (12 if s.timestamps else 0)


def test_numbers_are_read_with_the_kit_units():
    s = LabSettings(rate="500Mbit", queue="64KB", burst="32KiB", loss="1%", bytes=None, duration_s="8s")
    assert (s.rate, s.queue, s.burst, s.loss, s.duration_s) == (500_000_000, 64_000, 32768, 0.01, 8.0)
    assert LabSettings(loss="0.01").loss == 0.01 and LabSettings(loss=0.02).loss == 0.02


@pytest.mark.parametrize("seconds", [58, 90, 600])
def test_iperf_gets_the_duration_plus_a_grace(seconds):
    s = LabSettings(bytes=None, duration_s=seconds)
    assert s.iperf_timeout_s == seconds + 30
    assert LabSettings().iperf_timeout_s == 60


def test_loss_puts_single_segments_on_the_routers_wire():
    assert LabSettings(loss="1%").sender_tso is False and LabSettings().sender_tso is True
    assert LabSettings(blackhole_mtu=1400).egress_mtu == 1400
    assert LabSettings(blackhole_mtu=1400).expected_payload() == 1400 - 40 - 12


def test_sizes_and_tcpdump_counters_are_read():
    assert parse_size("4M") == 4_000_000 and parse_size("64KiB") == 65536 and parse_size(1000) == 1000
    text = ("tcpdump: listening on oklrin0, link-type EN10MB (Ethernet), snapshot length 128 bytes\n"
            "63 packets captured\n145 packets received by filter\n2 packets dropped by kernel\n")
    assert _tcpdump_stats(text) == {"captured": 63, "received": 145, "dropped": 2}


def test_snmp_counters_are_read_by_nstat_names():
    from offloadkit.lab.runner import parse_snmp
    text = ("Tcp: RtoAlgorithm RtoMin RetransSegs\nTcp: 1 200 17\n"
            "TcpExt: TCPTimeouts TCPLossProbes\nTcpExt: 3 5\n")
    assert parse_snmp(text) == {"TcpRtoAlgorithm": 1, "TcpRtoMin": 200, "TcpRetransSegs": 17,
                                "TcpExtTCPTimeouts": 3, "TcpExtTCPLossProbes": 5}


def test_owner_is_the_pid_and_its_start_time():
    me = os.getpid()
    start = safety.start_ticks(me)
    assert start is not None and safety.run_tag() == f"{me}-{start}"
    assert safety.owner_alive(me, start) and safety.owner_alive(me, None)
    assert not safety.owner_alive(me, start + 1), "a recycled pid is not the owner"
    m = safety.NS_RE.match(safety.ns_name(safety.run_tag(), "snd"))
    assert m and (int(m.group(1)), int(m.group(2))) == (me, start)
    assert safety.NS_RE.match("okl-123-snd").group(2) is None


def test_sweep_removes_temp_folders_of_a_recycled_pid():
    me, start = os.getpid(), safety.start_ticks(os.getpid())
    stale = tempfile.mkdtemp(prefix=f"okl-captures-{me}-{start + 1}-")
    mine = tempfile.mkdtemp(prefix=f"okl-captures-{me}-{start}-")
    try:
        removed = safety.sweep_temp()
        assert stale in removed and not os.path.exists(stale)
        assert mine not in removed and os.path.exists(mine)
    finally:
        shutil.rmtree(mine, ignore_errors=True)
        shutil.rmtree(stale, ignore_errors=True)


def test_a_signal_while_the_scratch_folder_goes_is_delivered_after(monkeypatch):
    real = shutil.rmtree
    seen = []

    def rmtree_interrupted(path, **kw):
        os.kill(os.getpid(), signal.SIGTERM)  # a kill during teardown
        seen.append(path)
        real(path, **kw)

    monkeypatch.setattr(safety.shutil, "rmtree", rmtree_interrupted)
    with pytest.raises(safety.LabInterrupted):
        with safety.signals_raise():
            with safety.scratch_dir("captures") as d:
                assert os.path.isdir(d)
    assert seen == [d] and not os.path.exists(d)


def test_safety_never_touches_names_without_the_prefix():
    assert safety.ns_name(123, "snd") == "okl-123-snd"
    for name in ("eth0", "okl", "okl-keep-1", "foo-1-snd", "okl-12-snd; rm"):
        with pytest.raises(ValueError):
            safety.delete_namespace(name)
        assert not safety.NS_RE.match(name)


# -- refusal -----------------------------------------------------------------
@pytest.mark.parametrize("action", ["run", "compare", "sweep"])
def test_forced_refusal_is_one_sentence_and_exit_2(action):
    env = dict(os.environ, **{safety.FORCE_REFUSE_ENV: "1"})
    p = _offloadkit("lab", action, env=env)
    assert p.returncode == 2
    assert p.stderr.strip() == REFUSAL
    assert p.stdout == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to an unprivileged user")
def test_unprivileged_user_gets_the_refusal():
    """In a forked child that became nobody: the modules are already loaded, so where the
    checkout lies (a folder nobody cannot read) does not matter."""
    import io
    from contextlib import redirect_stderr
    from offloadkit.cli import main
    import offloadkit.commands.lab  # noqa: F401 - loaded before the fork, with what `lab run`
    import offloadkit.lab.tcp  # noqa: F401 - imports lazily (numba cannot cache as nobody)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            os.close(read)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            os.environ.pop(safety.FORCE_REFUSE_ENV, None)
            err = io.StringIO()
            with redirect_stderr(err):
                code = main(["lab", "run", "--bytes", "64K"])
            os.write(write, err.getvalue().encode())
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as f:
        stderr = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2, stderr
    assert stderr.strip() == REFUSAL


@pytest.mark.parametrize("args, words", [
    (["--duration", "-5"], "--duration"), (["--duration", "nan"], "--duration"),
    (["--duration", "0"], "more than 0 s"), (["--rate-limit", "0bit"], "out of range"),
    (["--rate", "1e400Mbit"], "--rate-limit"), (["--loss", "2"], "--loss"), (["--queue", "64KB"], "--rate-limit"),
])
def test_bad_numbers_fail_before_the_lab_is_built(args, words):
    env = dict(os.environ, **{safety.FORCE_REFUSE_ENV: "1"})  # it would refuse after the settings
    p = _offloadkit("lab", "run", *args, env=env)
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and words in p.stderr, p.stderr
    assert "not both" not in p.stderr


def test_bad_knob_is_one_line_exit_2():
    p = _offloadkit("lab", "run", "--mss", "3000")
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "does not fit" in p.stderr


# -- real kernel -------------------------------------------------------------
def _lab_namespaces_of(pid: int) -> list[str]:
    return [n for n in safety.lab_namespaces() if n.startswith(f"okl-{pid}-")]


def _stale() -> list[str]:
    """Lab namespaces whose creating process is gone (others may belong to a run in progress)."""
    return [n for n in safety.lab_namespaces() if _gone(int(safety.NS_RE.match(n).group(1)))]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return True


def _start_worker(tmp_path):
    """A lab run long enough to be killed midway; returns (process, pids inside its namespaces)."""
    p = subprocess.Popen([sys.executable, "-m", "offloadkit", "lab", "run", "--topology", "direct",
                          "--duration", "30", "--rate-limit", "20Mbit", "--json"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    inside: list[int] = []
    while time.monotonic() < deadline:
        names = _lab_namespaces_of(p.pid)
        inside = [q for n in names for q in safety.ns_pids(n)]
        if len(names) == 2 and len(inside) >= 4:  # 2 tcpdump + iperf3 server + client
            break
        assert p.poll() is None, p.communicate()
        time.sleep(0.1)
    else:
        p.kill()
        pytest.fail("the lab worker did not start its experiment within 30 s")
    time.sleep(0.5)
    return p, inside


@kernel
@needs_lab
def test_sigterm_midway_leaves_nothing(tmp_path):
    p, inside = _start_worker(tmp_path)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "removed" in err
    assert _lab_namespaces_of(p.pid) == []
    time.sleep(0.2)
    assert all(_gone(q) for q in inside), [q for q in inside if not _gone(q)]
    assert not list(Path(tempfile.gettempdir()).glob(f"okl-captures-{p.pid}-*"))


@kernel
@needs_lab
def test_sigkill_midway_is_swept_by_the_next_run(tmp_path):
    p, inside = _start_worker(tmp_path)
    p.kill()
    p.wait(10)
    assert _lab_namespaces_of(p.pid), "SIGKILL cannot clean up: the namespaces should still be there"
    time.sleep(0.3)
    assert all(_gone(q) for q in inside), "children die with the worker (PR_SET_PDEATHSIG)"
    nxt = _offloadkit("lab", "run", "--topology", "direct", "--bytes", "64K", "--json", timeout=120)
    assert nxt.returncode == 0, nxt.stderr
    assert _lab_namespaces_of(p.pid) == []
    assert not list(Path(tempfile.gettempdir()).glob(f"okl-captures-{p.pid}-*"))
    assert _stale() == [], "the next run left namespaces"


@kernel
@needs_lab
def test_sweep_spares_live_runs_and_foreign_names():
    sleeper = subprocess.Popen(["sleep", "60"])
    live, foreign = f"okl-{sleeper.pid}-tst", f"okl-keep-{os.getpid()}"
    try:
        for n in (live, foreign):
            subprocess.run(["ip", "netns", "add", n], check=True)
        safety.sweep()
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert live in names and foreign in names
        safety.sweep(everything=True)
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert live not in names and foreign in names
    finally:
        sleeper.kill()
        sleeper.wait()
        for n in (live, foreign):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


@kernel
@needs_lab
def test_lab_run_json_reports_goodput_captures_and_commands(tmp_path):
    p = _offloadkit("lab", "run", "--mss", "1000", "--bytes", "256K", "--json", "--capture", str(tmp_path))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["goodput_bps"] > 1e6 and isinstance(out["retransmits"], int)
    assert set(out["captures"]) == {"router-in", "router-out", "rcv"}
    assert all(Path(f).stat().st_size > 0 for f in out["captures"].values())
    cmds = "\n".join(out["commands"])
    assert "iperf3 -c 198.18." in cmds and "-M 1000" in cmds and "ethtool -K oklsnd0" in cmds
    assert "ip netns del" in cmds
    # the wire after the router carries 1000 - 12 (timestamps) byte segments
    assert max(map(int, out["segment_sizes"]["router-out"])) == 988
    assert _stale() == []


@kernel
@needs_lab
def test_lab_compare_puts_kernel_and_kit_side_by_side(tmp_path):
    p = _offloadkit("lab", "compare", "--clamp", "1452", "--path-mtu", "1492", "--bytes", "256K", "--json",
                    "--capture", str(tmp_path), timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["gso_size"] == out["expected_gso_size"] == 1440
    assert max(map(int, out["kernel"]["router-out"])) == 1440
    assert max(map(int, out["kernel"]["router-in"])) > 1440
    assert out["segmentation"]["ok"], out["segmentation"]["summary"]
    assert out["kit"]["router-out"] == out["kernel"]["router-out"]
    assert out["gro"]["ok"], out["gro"]["summary"]
    sim = out["simulation"]
    if "segment_sizes" in sim:  # the kit's simulation of the same knobs cuts at the same MSS
        assert max(map(int, sim["segment_sizes"]["router-out"])) == 1440
    assert _stale() == []


def test_try_on_kernel_explains_a_skip(monkeypatch):
    from offloadkit.lab.compare import try_on_kernel
    monkeypatch.setenv(safety.FORCE_REFUSE_ENV, "1")
    assert try_on_kernel(LabSettings()) == {"skipped": REFUSAL}


@pytest.mark.parametrize("kw", [dict(), dict(timestamps=False), dict(mss=536), dict(clamp=1452, path_mtu=1492),
                                dict(mtu=9000), dict(mss=1000, clamp=1300)])
def test_simulation_scenario_starts_at_the_lab_mss(kw):
    from offloadkit.lab.compare import scenario_for
    s = LabSettings(**kw)
    assert scenario_for(s).mss_bytes == s.expected_payload()
