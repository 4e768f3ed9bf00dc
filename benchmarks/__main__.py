"""``python -m benchmarks``: run every ``benchmarks/bench_*.py`` module (and ``live.py``)'s ``main()`` with its defaults."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import time
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if m.name.startswith("bench_") or m.name == "live")
    failed = []
    for name in names:
        print(f"== benchmarks.{name}", flush=True)
        start = time.perf_counter()
        try:
            mod = importlib.import_module(f"benchmarks.{name}")
            takes_argv = bool(inspect.signature(mod.main).parameters)
            mod.main([]) if takes_argv else mod.main()
        except Exception as e:  # keep going: one broken benchmark must not hide the others
            failed.append(name)
            print(f"!! benchmarks.{name} failed: {type(e).__name__}: {e}", flush=True)
        print(f"== {name} took {time.perf_counter() - start:.1f} s\n", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
