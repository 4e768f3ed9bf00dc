"""What a worker does: run a batch of jobs, one row of figures per job.

A row holds the engine's own figures, never recomputed here: for a simulated
scenario ``simulate.Result``'s goodput, retransmissions, drops and completion
time; for a CPU-model preset (splice, vlan-nat, vxlan) ``engine.cpu.CpuResult``'s
rate, bottleneck and each context's busy fraction.
"""
from __future__ import annotations

import math
import os
import re
import socket

from ..engine.cpu import CpuResult
from ..reports import presets
from ..sim.scenario import Scenario
from ..sim.simulate import Result, simulate
from .grid import PresetJob


def tcp_figures(res: Result) -> dict:
    """A simulated run's figures; ``completion_s`` is the last flow's finish (NaN while any is unfinished)."""
    done = [int(c) for c in res.completion_ns]
    row = {
        "goodput_bps": float(res.goodput_bps),
        "retransmits": int(res.retransmits),
        "retransmit_packets": int(res.retransmit_packets),
        "rtos": int(res.rtos),
        "drops": int(sum(res.drops.values())),
        "completion_s": max(done) / 1e9 if done and min(done) >= 0 else math.nan,
        "duration_s": float(res.duration_s),
        "delivered_bytes": int(res.delivered_bytes),
        "mss_bytes": int(res.mss_bytes),
        "events": int(res.events),
    }
    row.update({drop_column(reason): int(n) for reason, n in res.drops.items()})
    return row


def drop_column(reason: str) -> str:
    """``"over MTU, dropped silently"`` -> ``"drops_over_mtu_dropped_silently"``."""
    return "drops_" + re.sub(r"[^a-z0-9]+", "_", reason.lower()).strip("_")


def cpu_figures(res: CpuResult) -> dict:
    """A CPU-model run's figures: rates, the limiting context and each context's busy fraction."""
    row = {"goodput_bps": float(res.rate_bps), "wire_rate_bps": float(res.wire_rate_bps),
           "bottleneck": res.bottleneck, "cpu": float(res.cpu_utilisation())}
    row.update({f"cpu_{ctx}": float(u) for ctx, u in res.utilisation().items()})
    return row


def run_job(job) -> dict:
    """The figures of one job. Scenarios run with ``trace_limit=0``: a sweep keeps the
    statistics (which cover the whole run whatever the limit), not the packets."""
    if isinstance(job, Scenario):
        return tcp_figures(simulate(job.replace(trace_limit=0)))
    if isinstance(job, PresetJob):
        run = presets.run_variant(job.report, job.variant, **job.knobs)
        if isinstance(run.result, Result):
            return tcp_figures(run.result)
        if isinstance(run.result, CpuResult):
            return cpu_figures(run.result)
        return {"goodput_bps": float(run.goodput_bps)}
    raise ValueError(f"a sweep job is a Scenario or a PresetJob, not {type(job).__name__}")


def worker_name() -> str:
    """The dask worker's address, or host:pid outside a dask worker."""
    try:
        from distributed import get_worker
        return str(get_worker().address)
    except (ImportError, ValueError):
        return f"{socket.gethostname()}:{os.getpid()}"


def run_batch(batch: list[tuple[int, object]]) -> list[tuple[int, dict]]:
    """Run ``(index, job)`` pairs in order; each row names the worker that ran it."""
    who = worker_name()
    return [(i, {**run_job(job), "worker": who}) for i, job in batch]
