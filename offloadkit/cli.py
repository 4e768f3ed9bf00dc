"""offloadkit: see what TSO/GSO, GRO/LRO and checksum offload do to TCP.

Each verb lives in ``offloadkit/commands/<verb>.py`` and provides
``configure(parser)`` and ``run(args) -> int``; only the verb being run is imported.
"""
from __future__ import annotations

import argparse
import importlib
import sys

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
    "sweep": "simulate every point of a parameter grid, on dask",
}


def _available(only: str | None = None) -> dict[str, object]:
    mods = {}
    for verb in ([only] if only in VERBS else VERBS):
        try:
            mods[verb] = importlib.import_module(f"offloadkit.commands.{verb.replace('-', '_')}")
        except ModuleNotFoundError as e:
            if e.name != f"offloadkit.commands.{verb}":
                raise
    return mods


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="offloadkit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    for verb, mod in _available(only).items():
        p = sub.add_parser(verb, help=VERBS[verb], description=VERBS[verb])
        mod.configure(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except (UsageError, ValueError, OSError) as e:
        print(f"offloadkit {args.verb}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
