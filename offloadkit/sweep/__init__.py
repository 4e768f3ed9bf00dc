"""Parameter sweeps on dask: ``offloadkit.sweep(base, grid, scheduler=None) -> DataFrame``.

    import offloadkit
    df = offloadkit.sweep("splice", {"sessions": [600, 800, 1000], "cache_bytes": [4e6, 8e6]})

The package is itself callable (``offloadkit.sweep(...)`` is ``offloadkit.sweep.sweep(...)``).
Points and jobs: :mod:`.grid`; what a worker runs: :mod:`.rows`; schedulers: :mod:`.run`.
"""
import sys
import types

from .grid import PresetJob, expand_grid, plan, scenario_with
from .rows import run_job
from .run import batches, close_local, sweep, write_table

__all__ = ["sweep", "expand_grid", "plan", "scenario_with", "PresetJob", "run_job", "batches",
           "close_local", "write_table"]


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
