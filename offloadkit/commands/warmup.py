"""``offloadkit warmup [--cache-dir DIR] [--quiet]``: compile every numba kernel now, with progress.

Without ``--cache-dir`` the kernels go where numba caches them for this install (beside
the package, else ``~/.cache``). With ``--cache-dir DIR`` they go into DIR, marked complete
at the end: a shared cache that an image or a read-only JupyterHub install can ship. It is
found by default at ``<sys.prefix>/share/offloadkit/numba-cache``, anywhere else with
``OFFLOADKIT_NUMBA_CACHE=DIR`` (see ``offloadkit.numba_cache`` and docs/deployment.md).
A cache built for other CPUs needs ``NUMBA_CPU_NAME=generic`` both here and at run time.

Once the capture verbs' kernels are warm, a child process records ``gro``, ``segment`` and
``doctor`` on the shipped captures and compiles the kernels they call ahead of time
(``offloadkit.aot``) into the same folder, while this one warms the rest; with
``OFFLOADKIT_AOT=0`` that step is skipped. A failed build says so in one line; the kit then
runs on numba.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..errors import UsageError
from .options import add_quiet


def configure(parser) -> None:
    parser.add_argument("--cache-dir", metavar="DIR", type=Path,
                        help="build a shared cache in DIR (default: numba's own cache for this install); "
                             "default lookup: " + "<sys.prefix>/share/offloadkit/numba-cache")
    add_quiet(parser)


def run(args) -> int:
    from .. import __version__, numba_cache
    if args.cache_dir is not None:
        if "numba" in sys.modules:
            raise UsageError("--cache-dir must be chosen before numba is loaded: run `offloadkit warmup "
                             "--cache-dir DIR` in its own process")
        args.cache_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(args.cache_dir, os.W_OK):
            raise UsageError(f"--cache-dir {args.cache_dir}: not writable; choose a folder you can write")
        os.environ["NUMBA_CACHE_DIR"] = str(args.cache_dir.resolve())
    from ..warmup import warm_all
    warm_all(progress=None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True)))
    if args.cache_dir is not None:
        cpu = os.environ.get("NUMBA_CPU_NAME", "host")
        numba_cache.write_stamp(args.cache_dir, f"offloadkit {__version__} NUMBA_CPU_NAME={cpu} built {time.time():.0f}\n")
        if not args.quiet:
            print(f"shared cache ready in {args.cache_dir} (CPU {cpu})", file=sys.stderr)
    return 0
