"""offloadkit: see what TSO/GSO, GRO/LRO and checksum offload do to TCP.

Each verb lives in ``offloadkit/commands/<verb>.py`` and provides
``configure(parser)`` and ``run(args) -> int``; only the verb being run is imported.

Exit status, every verb: 0 done; 1 the verb's own "found something" (``reproduce``: a row out
of tolerance; ``doctor``: a warning or worse); 2 bad input (one line naming the option or
file); 3 a bug in the kit (one line to report; ``--debug`` shows the traceback); 130 interrupted.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback

from .errors import UsageError

VERBS = {
    "segment": "segment super-packets of a capture as Linux GSO would",
    "gro": "aggregate a capture's packets as Linux GRO would",
    "simulate": "simulate TCP flows through the offload engine",
    "trace": "print a report preset's tcpdump lines at a capture point",
    "export": "write a report preset's packets at a capture point as pcap",
    "reproduce": "reproduce the five reports' numbers: report vs model",
    "doctor": "diagnose offload pathologies in a capture",
    "lab": "run the same knobs on the real Linux kernel (root, namespaces)",
    "warmup": "compile every numba kernel now (with progress), optionally into a shared cache",
    "sweep": "simulate every point of a parameter grid, on dask",
}
EPILOG = ("Exit status: 0 done, 1 the verb found a problem (reproduce, doctor), 2 bad input, "
          "3 a bug in offloadkit (add --debug for the traceback). Units: sizes and rates SI decimal "
          "(100MB, 100Mbit), KiB/MiB binary, bytes per second as 12.5MB/s; times 20ms, 10s.")
REPORT_TO = "please report it with the command line above"


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``offloadkit VERB: argument --x: what to write`` and exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _exists(verb: str) -> bool:
    return importlib.util.find_spec(f"offloadkit.commands.{verb.replace('-', '_')}") is not None


def _available(only: str | None = None) -> dict[str, object]:
    """The command modules of ``only`` (or of every verb), imported; verbs not installed are left out."""
    return {verb: importlib.import_module(f"offloadkit.commands.{verb.replace('-', '_')}")
            for verb in ([only] if only in VERBS else VERBS) if _exists(verb)}


def build_parser(only: str | None = None, every_verb: bool = False) -> argparse.ArgumentParser:
    """The parser for ``only`` (configured), or, for the top-level help, every verb's name without
    importing any verb (``every_verb=True`` configures them all, for tests)."""
    from . import __version__
    parser = Parser(prog="offloadkit", description=__doc__.splitlines()[0], epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"offloadkit {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the traceback when offloadkit fails")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=Parser)
    chosen = _available(None if every_verb else only) if (only in VERBS or every_verb) else {}
    for verb in VERBS:
        if verb in chosen or (not chosen and _exists(verb)):
            p = sub.add_parser(verb, help=VERBS[verb], description=VERBS[verb], epilog=EPILOG)
            if verb in chosen:
                chosen[verb].configure(p)
                p.set_defaults(_run=chosen[verb].run)
    return parser


def _verb(argv: list[str]) -> str | None:
    """The first word that is a verb (options such as --debug may come before it)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _quiet_stdout() -> None:
    """After a closed pipe (``offloadkit trace ... | head``): drop what is still buffered."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _run(args) -> int:
    """Run the verb; a verb that compiles numba kernels (a cache miss) says so on stderr. With
    the kernels compiled ahead of time (``offloadkit.aot``) the capture verbs do not import numba."""
    quiet = getattr(args, "quiet", False)
    if args.verb == "warmup":
        return int(args._run(args) or 0)
    from . import aot, numba_cache
    from .packet import jit
    if jit.EXPORTS is not None and args.verb in aot.VERBS:
        status = int(args._run(args) or 0)
        sys.stdout.flush()
        return status
    numba_cache.lean_import()
    from .jit_notes import watch_compiles
    with watch_compiles(quiet=quiet) as watch:
        status = int(args._run(args) or 0)
        sys.stdout.flush()
    if watch.summary() and not quiet:
        print(watch.summary(), file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    try:
        parser = build_parser(_verb(argv))
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the verb's parser, so that the line names the verb
            sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
            (sub.choices.get(args.verb) or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:  # --help, --version and argparse's one-line errors
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    where = f"offloadkit {args.verb}"
    try:
        return _run(args)
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"{where}: interrupted", file=sys.stderr)
        return 130
    except (UsageError, ValueError, OSError) as e:
        if debug:
            traceback.print_exc()
        print(f"{where}: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: one line to report, the traceback only on --debug
        if debug:
            traceback.print_exc()
        print(f"{where}: internal error {type(e).__name__}: {e}; {REPORT_TO}: offloadkit "
              f"{' '.join(argv)} (add --debug for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
