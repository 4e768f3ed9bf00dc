"""``offloadkit sweep`` on a real dask cluster (scheduler + two worker processes) and on the
local default: the same rows, and both workers used."""
import json
import subprocess
import sys

import pytest

from offloadkit.sim.scenario import Scenario
from offloadkit.sweep import sweep

from .conftest import ROOT, kit_env

pytestmark = pytest.mark.timeout(900)

GRID = ["--grid", "mss=536,1000,1448", "--grid", "loss=0,0.02,0.05", "--grid", "rtt=10ms,40ms",
        "--bytes", "100KB", "--rate", "50Mbit"]


def run_cli(*extra) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "offloadkit", "sweep", *GRID, *extra, "--json", "--no-progress"],
                          capture_output=True, text=True, env=kit_env(), cwd=ROOT, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def without_worker(rows):
    return [{k: v for k, v in r.items() if k != "worker"} for r in rows]


def test_cluster_and_local_default_give_the_same_rows(dask_cluster):
    address, workers = dask_cluster
    remote = run_cli("--scheduler", address)
    local = run_cli("--workers", "2")
    assert len(remote) == 18
    assert [(r["mss"], r["loss"], r["rtt"]) for r in remote][:3] == [(536, 0.0, "10ms"), (536, 0.0, "40ms"),
                                                                   (536, 0.02, "10ms")]
    assert without_worker(remote) == without_worker(local)
    assert sorted({r["worker"] for r in remote}) == workers
    assert {r["worker"] for r in local}.isdisjoint(workers)
    # the figures vary with the grid (not one row repeated): loss costs retransmissions, RTT costs goodput
    assert any(r["retransmits"] > 0 for r in remote if r["loss"] > 0)
    assert all(r["retransmits"] == 0 for r in remote if r["loss"] == 0)
    by = {(r["mss"], r["loss"], r["rtt"]): r["goodput_bps"] for r in remote}
    assert all(by[(m, 0.0, "10ms")] > by[(m, 0.0, "40ms")] for m in (536, 1000, 1448))


def test_library_on_a_client_matches_sync(dask_cluster):
    distributed = pytest.importorskip("distributed")
    address, workers = dask_cluster
    base = Scenario.simple(rate_bps=50_000_000, rtt_ns=10_000_000, bytes_per_flow=80_000)
    grid = {"tcp.mss": [600, 1200, 1448], "path.0.loss": [0.0, 0.03]}
    with distributed.Client(address) as client:
        on_cluster = sweep(base, grid, client, batch_size=1, progress=False)
    here = sweep(base, grid, "sync", progress=False)
    assert on_cluster.drop(columns="worker").equals(here.drop(columns="worker"))
    assert set(on_cluster.worker) <= set(workers)
