"""A real dask cluster on localhost: ``dask scheduler`` and two ``dask worker`` processes."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_TIMEOUT_S = 240          # two workers importing numba kernels on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kit_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """``(address, [worker addresses])`` of a scheduler and two single-threaded workers, torn down afterwards."""
    distributed = pytest.importorskip("distributed")
    logs = tmp_path_factory.mktemp("dask")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask = [sys.executable, "-m", "dask"]
    procs = []

    def start(name, args):
        with open(logs / f"{name}.log", "w") as log:          # the child keeps its own copy of the descriptor
            procs.append(subprocess.Popen(dask + args, stdout=log, stderr=subprocess.STDOUT, env=kit_env(),
                                          cwd=str(logs), start_new_session=True))
    try:
        start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"])
        for name in ("wA", "wB"):
            start(name, ["worker", address, "--host", "127.0.0.1", "--nworkers", "1", "--nthreads", "1",
                         "--no-dashboard", "--name", name])
        deadline = time.monotonic() + START_TIMEOUT_S
        client = None
        while client is None:
            try:
                client = distributed.Client(address, timeout="5s")
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        with client:
            client.wait_for_workers(2, timeout=max(1.0, deadline - time.monotonic()))
            workers = sorted(client.scheduler_info()["workers"])
        yield address, workers
    finally:
        _stop(procs)
