"""Run a sweep on dask.distributed and gather one row per grid point.

``scheduler``:

- ``None``: an embedded ``LocalCluster`` of worker processes, one per core,
  started on first use and kept for the rest of the Python session;
- ``"tcp://host:8786"``: the scheduler of any running cluster (``dask scheduler``
  + ``dask worker``, dask-jobqueue on Slurm/PBS, dask-kubernetes);
- a ``distributed.Client``: used as it is;
- ``"threads"``: one in-process worker with a thread per core (useful once the
  kernels release the GIL);
- ``"sync"``: no dask at all, every point in this process, in order.

Points are dealt round-robin into batches (several points per task, so the
scheduler's per-task cost is shared) and rows stream back as batches finish.
"""
from __future__ import annotations

import atexit
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence

import pandas as pd

from .grid import plan
from .rows import run_batch

_LOCAL: dict[str, object] = {}           # the embedded clusters of this process, by kind


def distributed():
    """The dask.distributed module, or an ImportError saying how to install it."""
    try:
        import distributed as dd
    except ImportError as e:
        raise ImportError(f"sweeps run on dask.distributed ({e.name} is missing): pip install 'offloadkit[dask]', "
                          f"or run in this process with scheduler='sync'", name=e.name) from None
    return dd


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def batches(n_points: int, n_workers: int, batch_size: int | None = None) -> list[list[int]]:
    """Point indices dealt round-robin into batches: by default about four per worker,
    at most 64 points each (costly and cheap points mix, so batches take similar time)."""
    if n_points == 0:
        return []
    if batch_size is None:
        batch_size = min(64, max(1, -(-n_points // (4 * max(n_workers, 1)))))
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch size must be a positive integer, not {batch_size!r}")
    n_batches = -(-n_points // batch_size)
    return [list(range(b, n_points, n_batches)) for b in range(n_batches)]


def local_client(kind: str = "processes", workers: int | None = None):
    """The embedded cluster's Client (started once per process and kind, closed at exit)."""
    dd = distributed()
    n = workers or cores()
    key = f"{kind}:{n}"
    client = _LOCAL.get(key)
    if client is None or client.status != "running":
        import dask
        threads = kind == "threads"
        with dask.config.set({"distributed.worker.profile.enabled": False}):   # no 10 ms sampling thread
            cluster = dd.LocalCluster(n_workers=1 if threads else n, threads_per_worker=n if threads else 1,
                                   processes=not threads, dashboard_address=None, silence_logs=logging.ERROR)
        client = dd.Client(cluster)
        _LOCAL[key] = client
        atexit.register(close_local)
    return client


def close_local() -> None:
    """Close the embedded clusters."""
    while _LOCAL:
        _, client = _LOCAL.popitem()
        cluster = client.cluster
        client.close()
        if cluster is not None:
            cluster.close()


def client_for(scheduler, workers: int | None = None):
    """``(client, owned)`` for ``scheduler`` (see the module docstring): ``owned`` when the
    caller should close it after the sweep; ValueError for anything else."""
    Client = distributed().Client
    if scheduler is None:
        return local_client("processes", workers), False
    if scheduler == "threads":
        return local_client("threads", workers), False
    if isinstance(scheduler, Client):
        return scheduler, False
    if isinstance(scheduler, str) and re.fullmatch(r"[\w.\-\[\]:]+:\d+", scheduler):
        scheduler = f"tcp://{scheduler}"                    # host:port, as dask prints it without the protocol
    if isinstance(scheduler, str) and "://" in scheduler:
        try:
            return Client(scheduler, timeout="20s"), True
        except (OSError, TimeoutError) as e:
            raise ValueError(f"scheduler {scheduler}: cannot connect ({e}); start one with `dask scheduler` "
                             f"and give the address it prints") from None
    raise ValueError(f"scheduler {scheduler!r}: give an address like tcp://host:8786, a distributed.Client, "
                     f"'threads', 'sync' or None (a local cluster)")


Progress = Callable[[int, int], None]


def _progress_bar(total: int, progress) -> tuple[Progress, Callable[[], None]]:
    """An update(done, total) callback and a close(): tqdm on stderr, a caller's callback, or nothing."""
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return (lambda done, total: None), lambda: None
    from tqdm.auto import tqdm
    bar = tqdm(total=total, unit="point", desc="sweep", leave=False)

    def update(done: int, _total: int) -> None:
        bar.update(done - bar.n)
    return update, bar.close


def run_jobs(jobs: list, scheduler=None, workers: int | None = None, batch_size: int | None = None,
             progress=True) -> list[dict]:
    """One row per job, in job order, whichever worker ran it."""
    update, close = _progress_bar(len(jobs), progress)
    rows: list[dict | None] = [None] * len(jobs)
    done = 0
    try:
        if scheduler == "sync":
            for i, job in enumerate(jobs):
                rows[i] = run_batch([(i, job)])[0][1]
                done += 1
                update(done, len(jobs))
            return rows
        as_completed = distributed().as_completed
        client, owned = client_for(scheduler, workers)
        try:
            slots = sum(client.nthreads().values()) or 1
            futures = [client.submit(run_batch, [(i, jobs[i]) for i in idx], pure=False)
                       for idx in batches(len(jobs), slots, batch_size)]
            for fut in as_completed(futures):
                for i, row in fut.result():
                    rows[i] = row
                    done += 1
                update(done, len(jobs))
                fut.release()
        finally:
            if owned:
                client.close()
        return rows
    finally:
        close()


def sweep(base, grid: Mapping[str, Sequence], scheduler=None, *, workers: int | None = None,
          batch_size: int | None = None, progress=True) -> pd.DataFrame:
    """Run ``base`` at every point of ``grid``; one row per point, in grid order.

    ``base``: a :class:`~offloadkit.sim.scenario.Scenario` (grid names are field
    paths: ``tcp.mss``, ``nic.tso``, ``path.0.mtu``, ``seed``), a report preset
    (``"splice"``, ``"splice/below"`` or ``("splice", "below")``; grid names are
    its knobs) or a function of the grid's names returning a Scenario.
    ``grid``: ``{name: [values]}``; the first name varies slowest.
    ``scheduler``: see :mod:`offloadkit.sweep.run` (None: a local cluster).
    ``progress``: a tqdm bar (True), none (False) or a ``callback(done, total)``.

    Columns: the grid's names, the figures (``goodput_bps``, ``retransmits``,
    ``drops``, ``completion_s`` ... for simulated scenarios; ``goodput_bps``,
    ``bottleneck``, ``cpu_<context>`` for CPU-model presets) and ``worker``.
    The rows are the same on every scheduler (apart from ``worker``).
    """
    points, jobs = plan(base, grid)
    rows = run_jobs(jobs, scheduler, workers=workers, batch_size=batch_size, progress=progress)
    records = [{**point, **row} for point, row in zip(points, rows)]
    df = pd.DataFrame.from_records(records)
    drop_cols = [c for c in df.columns if c.startswith("drops_")]
    if drop_cols:
        df[drop_cols] = df[drop_cols].fillna(0).astype("int64")
    return df[[c for c in df.columns if c != "worker"] + ["worker"]]


def write_table(df: pd.DataFrame, path: str) -> None:
    """Write the rows as Parquet (``.parquet``/``.pq``, with pyarrow) or CSV (``.csv``)."""
    if path.endswith((".parquet", ".pq")):
        df.to_parquet(path, index=False)
    elif path.endswith(".csv"):
        df.to_csv(path, index=False)
    else:
        raise ValueError(f"{path}: name the file .parquet or .csv")
