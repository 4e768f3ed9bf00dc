"""Grid expansion, jobs, rows and the CLI's one-line errors (no cluster: ``scheduler="sync"``)."""
import json

import pandas as pd
import pytest

import offloadkit
from offloadkit import cli
from offloadkit.reports import presets
from offloadkit.sim.scenario import Scenario
from offloadkit.sim.simulate import simulate
from offloadkit.sweep import PresetJob, batches, expand_grid, plan, scenario_with

BASE = Scenario.simple(rate_bps=100_000_000, rtt_ns=10_000_000, bytes_per_flow=60_000)


def test_expand_grid_first_name_varies_slowest():
    pts = expand_grid({"a": [1, 2], "b": ["x", "y", "z"]})
    assert len(pts) == 6
    assert pts[:4] == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"}, {"a": 2, "b": "x"}]


def test_expand_grid_takes_ranges_and_numpy():
    import numpy as np
    pts = expand_grid({"mss": np.array([536, 1448]), "seed": range(1, 3)})
    assert pts[1] == {"mss": 536, "seed": 2} and type(pts[0]["mss"]) is int


@pytest.mark.parametrize("grid, words", [
    ({}, "empty"), ({"mss": []}, "no values"), ({"mss": [536, 536]}, "twice"),
])
def test_expand_grid_errors(grid, words):
    with pytest.raises(ValueError, match=words):
        expand_grid(grid)
    for values in ("536", 536, {"a": 1}):
        with pytest.raises(TypeError, match="give a list of values"):
            expand_grid({"mss": values})


def test_scenario_with_dotted_paths():
    sc = scenario_with(scenario_with(BASE, "tcp.mss", 1000), "path.0.mtu", 1400)
    assert sc.tcp.mss == 1000 and sc.path[0].mtu == 1400 and sc.path[0].rate_bps == BASE.path[0].rate_bps
    assert scenario_with(BASE, "seed", 7).seed == 7
    with pytest.raises(ValueError, match="no field 'msss'.*mss"):
        scenario_with(BASE, "tcp.msss", 1)
    with pytest.raises(ValueError, match="index, 0..0"):
        scenario_with(BASE, "path.3.mtu", 1400)


def test_plan_names_the_bad_point():
    with pytest.raises(ValueError, match=r"grid point tcp.mss=9000: MSS 9000 does not fit in MTU 1500"):
        plan(BASE, {"tcp.mss": [536, 9000]})
    with pytest.raises(ValueError, match="grid point bogus=1: unknown knob 'bogus'"):
        plan("splice", {"bogus": [1]})
    with pytest.raises(ValueError, match="unknown report 'nope'"):
        plan(("nope", "broken"), {"x": [1]})
    with pytest.raises(ValueError, match="base is a Scenario"):
        plan(42, {"x": [1]})
    _, jobs = plan("vxlan/broken", {"gro": [True, False]})
    assert jobs == [PresetJob("vxlan", "broken", {"gro": True}), PresetJob("vxlan", "broken", {"gro": False})]


@pytest.mark.parametrize("n, workers, size", [(1, 2, None), (18, 2, None), (200, 2, None), (200, 1, 7), (5, 8, None)])
def test_batches_cover_every_point_once(n, workers, size):
    bs = batches(n, workers, size)
    assert sorted(i for b in bs for i in b) == list(range(n))
    assert max(map(len, bs)) - min(map(len, bs)) <= 1
    if size:
        assert max(map(len, bs)) <= size
    else:
        assert len(bs) <= max(4 * workers, 1) and max(map(len, bs)) <= 64
    with pytest.raises(ValueError, match="batch size"):
        batches(3, 1, 0)


def test_scenario_rows_are_simulate_figures():
    df = offloadkit.sweep(BASE, {"tcp.mss": [536, 1448], "path.0.loss": [0.0, 0.05]}, scheduler="sync",
                          progress=False)
    assert list(df.columns[:2]) == ["tcp.mss", "path.0.loss"] and df.columns[-1] == "worker"
    for row in df.itertuples(index=False):
        res = simulate(scenario_with(scenario_with(BASE, "tcp.mss", row[0]), "path.0.loss", row[1]))
        assert row.goodput_bps == res.goodput_bps and row.retransmits == res.retransmits
        assert row.drops == sum(res.drops.values()) and row.completion_s == res.completion_ns.max() / 1e9
    lossy = df[df["path.0.loss"] > 0]
    assert (lossy.drops == lossy.drops_random_loss).all() and lossy.drops.sum() > 0


def test_factory_base_and_progress_callback():
    seen = []
    df = offloadkit.sweep(lambda mss: BASE.replace(tcp=BASE.tcp.__class__(mss=mss)), {"mss": [700, 1400]},
                          scheduler="sync", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 2), (2, 2)]
    assert df.mss_bytes.tolist() == [700, 1400]
    assert df.goodput_bps.iloc[1] > df.goodput_bps.iloc[0]


def test_cpu_preset_rows():
    df = offloadkit.sweep("vxlan", {"gro": [True, False]}, scheduler="sync", progress=False)
    for row in df.itertuples(index=False):
        run = presets.run_variant("vxlan", "broken", gro=row.gro)
        assert row.goodput_bps == run.goodput_bps and row.bottleneck == run.result.bottleneck
        assert row.cpu_vhost == run.result.utilisation()["vhost"]


def _main(capsys, *argv):
    rc = cli.main(["sweep", *argv, "--no-progress"])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv, words", [
    ([], "give at least one --grid"),
    (["--grid", "foo=1"], "'foo' is not a simulate flag; use one of"),
    (["--grid", "mss=abc"], "--grid mss=abc: mss takes int values"),
    (["--grid", "mss"], "write NAME=V1,V2"),
    (["--grid", "tso=maybe"], "tso is a switch; give on or off"),
    (["--grid", "nic=bogus"], "choose from"),
    (["--grid", "rate=fast"], "grid point rate=fast: cannot read rate 'fast'"),
    (["--grid", "rtt=1ns"], "grid point rtt=1ns: --rtt 1ns is too small"),
    (["--grid", "mss=536", "--grid", "mss=1000"], "given twice"),
    (["--grid", "mss=536", "--mss", "1000"], "--grid mss and a fixed --mss"),
    (["--grid", "tso=on,off", "--no-tso"], "--grid tso and a fixed --tso"),
    (["--grid", "mss=536", "--out", "rows.txt"], "name the file .parquet or .csv"),
    (["--grid", "mss=536", "--out", "/nonexistent/rows.csv"], "does not exist"),
    (["--grid", "mss=536", "--scheduler", "bogus"], "give an address like tcp://host:8786"),
])
def test_cli_errors_are_one_line_exit_2(capsys, argv, words):
    rc, out, err = _main(capsys, *argv, "--bytes", "50KB")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("offloadkit sweep: ") and words in err


def test_cli_json_and_out(capsys, tmp_path):
    grid = ["--grid", "path-mtu=1400,1500", "--grid", "tso=on,off", "--bytes", "60KB", "--rtt", "10ms"]
    rc, out, _ = _main(capsys, *grid, "--scheduler", "sync", "--json", "--out", str(tmp_path / "r.parquet"))
    assert rc == 0
    rows = json.loads(out)
    assert [(r["path-mtu"], r["tso"]) for r in rows] == [(1400, True), (1400, False), (1500, True), (1500, False)]
    assert all({"goodput_bps", "retransmits", "worker", "drops"} <= r.keys() for r in rows)
    # path MTU 1400 under a 1500 sender MTU with no ICMP: a black hole for full-size segments
    assert rows[0]["goodput_bps"] < rows[2]["goodput_bps"] / 10
    back = pd.read_parquet(tmp_path / "r.parquet")
    assert back["goodput_bps"].tolist() == [r["goodput_bps"] for r in rows]
    rc, out, _ = _main(capsys, *grid, "--scheduler", "sync", "--out", str(tmp_path / "r.csv"))
    assert rc == 0 and "goodput_Mbps" in out and "wrote 4 rows" in out
    assert pd.read_csv(tmp_path / "r.csv")["goodput_bps"].tolist() == back["goodput_bps"].tolist()
