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

ROOT = Path(__file__).resolve().parents[1]


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
    (dict(rate="fast"), "write it like 1Gbit"),
    (dict(delay="10 ms"), "write it like 10ms"),
    (dict(loss="0.1"), "write it like 0.1%"),
    (dict(loss="90%"), "too high"),
    (dict(duration_s=2), "not both"),
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


def test_sizes_and_tcpdump_counters_are_read():
    assert parse_size("4M") == 4_000_000 and parse_size("64KiB") == 65536 and parse_size(1000) == 1000
    text = ("tcpdump: listening on oklrin0, link-type EN10MB (Ethernet), snapshot length 128 bytes\n"
            "63 packets captured\n145 packets received by filter\n2 packets dropped by kernel\n")
    assert _tcpdump_stats(text) == {"captured": 63, "received": 145, "dropped": 2}


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


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_unprivileged_user_gets_the_refusal():
    # nobody cannot write numba's cache next to the sources: give it a cache dir of its own
    cache = tempfile.mkdtemp(prefix="okl-test-numba-")
    os.chmod(cache, 0o777)
    try:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        env.pop(safety.FORCE_REFUSE_ENV, None)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            sys.executable, "-m", "offloadkit", "lab", "run", "--bytes", "64K"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == REFUSAL


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
                          "--duration", "30", "--rate", "20mbit", "--json"],
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
