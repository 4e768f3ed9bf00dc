"""The notebooks' "Try it on a real kernel" sections: repeated lab runs, or the stored ones.

One short iperf3 run over veth is noise for its rate (on a loaded 2-core VM five
1 MB runs of one setting gave 0.2 to 3.9 Gb/s), while its packet sizes and counts
are stable. So
each experiment is run ``repeats`` times: the text shows the sizes per capture
point (and whether every run agreed), and the goodput as median with its
min-max spread, and compares settings only where their spreads do not overlap.

Where the lab cannot run (no root, no namespaces: Binder) the section shows the
runs stored in ``offloadkit/data/kernel-runs/<notebook>.json`` with their
provenance (kernel, date, machine, the command that made them):
``python -m offloadkit.ui.kernel_runs`` (as root) records them again.
"""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ..lab.compare import try_on_kernel
from ..lab.runner import LabSettings
from ..resources import data_dir
from .views import format_rate

REPEATS = 3
SMALLEST = 64               # iperf3's control messages are left out of the sizes

# notebook -> {label: settings}: the experiments of each notebook's real-kernel section
EXPERIMENTS: dict[str, dict[str, LabSettings]] = {
    "00": {"A: clamp 1452, hop MTU 1492, TSO on, GRO on": LabSettings(clamp=1452, path_mtu=1492, bytes="1M"),
           "B: the same, TSO off at the sender": LabSettings(clamp=1452, path_mtu=1492, tso=False, bytes="1M"),
           "C: the same, TSO on, GRO off at the receiver": LabSettings(clamp=1452, path_mtu=1492, gro=False,
                                                                       bytes="1M")},
    "01": {"A: clamp 1452, hop MTU 1492 (TSO, GSO, GRO on)": LabSettings(clamp=1452, path_mtu=1492, bytes="1M"),
           "B: the same, TSO and GSO off on the sender": LabSettings(clamp=1452, path_mtu=1492, tso=False,
                                                                     gso=False, bytes="1M"),
           "C: the same, GRO off at the receiver": LabSettings(clamp=1452, path_mtu=1492, gro=False, bytes="1M")},
    "02": {"A: hop MTU 1496, TSO and GSO on": LabSettings(path_mtu=1496, bytes="2M"),
           "B: hop MTU 1496, TSO and GSO off (the workaround)": LabSettings(path_mtu=1496, tso=False, gso=False,
                                                                            bytes="2M")},
    "03": {"A: GRO on, rx-checksumming on": LabSettings(bytes="2M"),
           "B: GRO off": LabSettings(gro=False, bytes="2M"),
           "C: GRO on, rx-checksumming off": LabSettings(rx_csum=False, bytes="2M")},
    "04": {"A: GRO on": LabSettings(bytes="2M"), "B: GRO off": LabSettings(gro=False, bytes="2M")},
    "05": {"A: receiver rx-checksumming off, GRO on": LabSettings(rx_csum=False, bytes="2M"),
           "B: receiver rx-checksumming off, GRO off": LabSettings(rx_csum=False, gro=False, bytes="2M")},
}


def store_path(notebook: str) -> Path:
    return data_dir() / "kernel-runs" / f"{notebook}.json"


def _one(settings: LabSettings) -> dict:
    """One lab run, reduced to what the section shows (or {"skipped": why})."""
    with tempfile.TemporaryDirectory(prefix="offloadkit-nb-") as tmp:
        r = try_on_kernel(settings, tmp)
    if "skipped" in r:
        return r
    run = {"goodput_bps": float(r["goodput_bps"]), "retransmits": int(r["retransmits"]),
           "kernel": {p: {str(s): int(c) for s, c in h.items()} for p, h in r["kernel"].items()},
           "kit": {p: {str(s): int(c) for s, c in h.items()} for p, h in r.get("kit", {}).items()}}
    for key in ("segmentation", "gro"):
        if key in r:
            run[key] = {"ok": bool(r[key]["ok"]), "summary": str(r[key]["summary"])}
    return run


def run_experiments(notebook: str, repeats: int = REPEATS, budget_s: float = 45.0) -> dict:
    """Run the notebook's experiments ``repeats`` times each on this kernel, round-robin (A, B, C, A, ...)
    so that a spent budget leaves every setting with about as many runs: {"experiments": ...}, or
    {"skipped": why} where the lab cannot run. Runs that would start after ``budget_s`` are left out."""
    t0 = time.monotonic()
    exps = EXPERIMENTS[notebook]
    out = {label: {"settings": {k: v for k, v in dataclasses.asdict(s).items() if v is not None}, "runs": []}
           for label, s in exps.items()}
    for _ in range(repeats):
        for label, settings in exps.items():
            left = budget_s - (time.monotonic() - t0)
            if left < 3:
                return {"experiments": out}
            try:
                r = _one(dataclasses.replace(settings, iperf_timeout_s=min(settings.iperf_timeout_s, left)))
            except (RuntimeError, OSError, ValueError) as e:
                r = {"failed": str(e)}
            if "skipped" in r:
                return r
            out[label]["runs"].append(r)
    return {"experiments": out}


def provenance(repeats: int) -> dict:
    return {"made_by": "python -m offloadkit.ui.kernel_runs (as root)", "kernel": platform.release(),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "repeats": repeats,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def record(notebooks=None, repeats: int = 5) -> list[Path]:
    """Run every notebook's experiments ``repeats`` times and store them with their provenance."""
    written = []
    for nb in notebooks or EXPERIMENTS:
        res = run_experiments(nb, repeats=repeats, budget_s=3600.0)
        if "skipped" in res:
            raise RuntimeError(f"cannot record: {res['skipped']}")
        path = store_path(nb)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"provenance": provenance(repeats), **res}, indent=1) + "\n", encoding="utf-8")
        written.append(path)
    return written


def stored(notebook: str) -> dict:
    """The stored runs of a notebook (ValueError if none were recorded)."""
    path = store_path(notebook)
    if not path.is_file():
        raise ValueError(f"no stored kernel runs for notebook {notebook} ({path.name}); "
                         f"record them as root with python -m offloadkit.ui.kernel_runs")
    return json.loads(path.read_text(encoding="utf-8"))


# -- the text ---------------------------------------------------------------------------
def top_sizes(hist: dict, n: int = 4) -> str:
    items = sorted(((int(s), c) for s, c in hist.items() if int(s) >= SMALLEST), key=lambda sc: -sc[1])[:n]
    return ", ".join(f"{c}×{s}" for s, c in items) or "-"


def rate_spread(runs: list[dict]) -> tuple[float, float, float] | None:
    """(median, min, max) goodput of the runs that completed, bit/s."""
    rates = [r["goodput_bps"] for r in runs if "goodput_bps" in r]
    return (statistics.median(rates), min(rates), max(rates)) if rates else None


def sizes_agree(runs: list[dict], point: str) -> bool:
    """Is the most frequent payload size at ``point`` the same in every run?"""
    modes = {max(((int(s), c) for s, c in r["kernel"].get(point, {}).items() if int(s) >= SMALLEST),
                 key=lambda sc: sc[1], default=(0, 0))[0] for r in runs if "kernel" in r}
    return len(modes) <= 1


def experiment_text(label: str, runs: list[dict]) -> list[str]:
    done = [r for r in runs if "kernel" in r]
    out = [label]
    for r in runs:
        if "failed" in r:
            out.append(f"  a run failed: {r['failed']}")
    if not done:
        return out + ["  no run completed"]
    med, lo, hi = rate_spread(done)
    out.append(f"  goodput over {len(done)} run{'s' if len(done) != 1 else ''}: median {format_rate(med)}, "
               f"spread {format_rate(lo)} to {format_rate(hi)}; retransmissions "
               f"{', '.join(str(r['retransmits']) for r in done)}")
    first = done[0]
    out.append(f"  {'point':11s} {'kernel (payload bytes, most frequent; run 1)':46s} kit's engine on the same input")
    for p, hist in first["kernel"].items():
        same = "" if sizes_agree(done, p) else "  (the most frequent size differs between runs)"
        out.append(f"  {p:11s} {top_sizes(hist):46s} {top_sizes(first['kit'].get(p, {}))}{same}")
    for key in ("segmentation", "gro"):
        oks = [r[key]["ok"] for r in done if key in r]
        if oks:
            out.append(f"  {key}: the kit {'agrees with' if all(oks) else 'DIFFERS from'} the kernel in "
                       f"{sum(oks)} of {len(oks)} runs ({first[key]['summary']})")
    return out


def comparison_text(experiments: dict) -> str:
    """Which settings' rates differ beyond the spread of their runs, and which do not."""
    spreads = {label: rate_spread(e["runs"]) for label, e in experiments.items()}
    spreads = {k[:1]: v for k, v in spreads.items() if v}
    keys = list(spreads)
    lines = []
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            (ma, la, ha), (mb, lb, hb) = spreads[a], spreads[b]
            if ha < lb or hb < la:
                faster = a if ma > mb else b
                lines.append(f"{faster} is faster than {b if faster == a else a} in every run.")
            else:
                lines.append(f"{a} and {b}: the runs overlap, so their rates do not differ beyond the noise.")
    return " ".join(lines)


def section_text(notebook: str, repeats: int = REPEATS, budget_s: float = 45.0) -> str:
    """The section's output: runs on this kernel, or the stored runs with their provenance."""
    res = run_experiments(notebook, repeats=repeats, budget_s=budget_s)
    if "skipped" in res:
        try:
            doc = stored(notebook)
        except ValueError as e:
            return f"The lab cannot run here ({res['skipped']}), and {e}."
        p = doc["provenance"]
        head = [f"The lab cannot run here ({res['skipped']})",
                (f"Stored runs instead: {p['repeats']} per setting on Linux {p['kernel']} ({p['machine']}), "
                 f"{p['date']}, made by {p['made_by']}; file offloadkit/data/kernel-runs/{notebook}.json."), ""]
        res = doc
    else:
        head = [f"Runs on this machine's kernel (Linux {platform.release()}), {repeats} per setting:", ""]
    body = []
    for label, e in res["experiments"].items():
        body += experiment_text(label, e["runs"])
    verdict = comparison_text(res["experiments"])
    tail = ["", f"Rates: {verdict}" if verdict else "",
            ("(Rates on veth depend on the machine and its load; the sizes do not. "
             "iperf3's control messages, under 64 bytes, are left out.)")]
    return "\n".join(head + body + [t for t in tail if t != ""])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    notebooks = [a for a in argv if a in EXPERIMENTS] or None
    for path in record(notebooks):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
