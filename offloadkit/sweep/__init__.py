"""Parameter sweeps on dask: ``offloadkit.sweep(base, grid, scheduler=None) -> DataFrame``.

    import offloadkit
    df = offloadkit.sweep("splice", {"sessions": [600, 800, 1000], "cache_bytes": [4e6, 8e6]})

The package is itself callable (``offloadkit.sweep(...)`` is ``offloadkit.sweep.sweep(...)``).
Points and jobs: :mod:`.grid`; what a worker runs: :mod:`.rows`; schedulers: :mod:`.run`.
Needs the ``[dask]`` extra: ``pip install 'offloadkit[dask]'``.

Beyond one machine, give any dask.distributed scheduler; every worker needs offloadkit installed
(the same version), nothing else::

    # by hand: one scheduler, workers anywhere that reach it
    dask scheduler                                   # prints tcp://10.0.0.1:8786
    dask worker tcp://10.0.0.1:8786 --nthreads 1     # on each machine, one per core
    offloadkit sweep --grid mss=536,1448 --grid loss=0,0.01 --scheduler tcp://10.0.0.1:8786

    # Slurm or PBS, with dask-jobqueue: workers are batch jobs
    from dask_jobqueue import SLURMCluster           # or PBSCluster
    cluster = SLURMCluster(cores=16, processes=16, memory="32GB", walltime="01:00:00")
    cluster.scale(jobs=8)                            # 8 nodes x 16 single-threaded workers
    df = offloadkit.sweep(base, grid, scheduler=distributed.Client(cluster))

    # Kubernetes, with dask-kubernetes (the operator): workers are pods of an image with offloadkit
    from dask_kubernetes.operator import KubeCluster
    cluster = KubeCluster(name="sweep", image="ghcr.io/you/offloadkit:latest", n_workers=32)
    df = offloadkit.sweep(base, grid, scheduler=distributed.Client(cluster))

Workers run one thread each: the numba kernels hold the GIL unless built ``nogil``.
"""
import sys
import types

from .grid import PresetJob, expand_grid, plan, scenario_with
from .rows import run_job
from .run import batches, close_local, sweep, write_table

__all__ = [
    "PresetJob",
    "batches",
    "close_local",
    "expand_grid",
    "plan",
    "run_job",
    "scenario_with",
    "sweep",
    "write_table",
]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
