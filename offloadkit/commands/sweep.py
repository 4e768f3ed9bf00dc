"""``offloadkit sweep``: ``simulate`` at every point of a grid, on dask.

    offloadkit sweep --grid mss=536,1000,1448 --grid loss=0,0.01 --bytes 1MB --out rows.parquet

``--grid NAME=V1,V2,...`` takes any ``simulate`` flag name (``mss``, ``loss``,
``rtt``, ``rate``, ``path-mtu``, ``nic``, ``tso``, ``gro`` ...), values parsed as
that flag parses them (on/off for switches); the other ``simulate`` flags are
fixed values. Runs on an embedded local cluster, or on ``--scheduler ADDRESS``.
"""
from __future__ import annotations

import argparse
import json
import math
import os

from ..errors import UsageError
from . import simulate

SWITCH_WORDS = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False,
                "1": True, "0": False}


def configure(parser) -> None:
    simulate.configure(parser)
    for action in parser._actions:
        if action.dest == "json":
            action.help = "print the rows as a JSON list (keys: the grid names, goodput_bps, retransmits, worker ...)"
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                        help="a simulate flag and the values to sweep (repeat for more dimensions)")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="dask scheduler, e.g. tcp://host:8786 (default: a local cluster, one worker per core)")
    parser.add_argument("--workers", type=int, default=None, help="local cluster size (default: one per core)")
    parser.add_argument("--out", default=None, metavar="FILE", help="write the rows to FILE.parquet or FILE.csv")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def _flag_actions() -> dict[str, argparse.Action]:
    """simulate's flags by name (``path-mtu``), switches under their positive name."""
    names = {}
    for action in simulate_parser()._actions:
        for opt in action.option_strings:
            name = opt.lstrip("-")
            if isinstance(action, argparse._StoreFalseAction) and name.startswith("no-"):
                continue
            names[name] = action
    names.pop("json", None)
    names.pop("help", None)
    return names


def simulate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    simulate.configure(parser)
    return parser


def parse_value(name: str, action: argparse.Action, text: str):
    """One grid value, parsed as ``simulate --NAME`` parses it."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if text.lower() not in SWITCH_WORDS:
            raise UsageError(f"--grid {name}={text}: {name} is a switch; give on or off")
        return SWITCH_WORDS[text.lower()]
    value = text
    if action.type is not None:
        try:
            value = action.type(text)
        except ValueError:
            raise UsageError(f"--grid {name}={text}: {name} takes {action.type.__name__} values") from None
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"--grid {name}={text}: choose from {', '.join(map(str, action.choices))}")
    return value


def parse_grid(specs: list[str]) -> tuple[dict[str, list], dict[str, str]]:
    """``["mss=536,1448", ...]`` -> ({"mss": [536, 1448]}, {"mss": "mss"}: grid name -> args dest)."""
    if not specs:
        raise UsageError("give at least one --grid NAME=V1,V2,... (e.g. --grid mss=536,1448)")
    actions = _flag_actions()
    grid, dests = {}, {}
    for spec in specs:
        name, eq, values = spec.partition("=")
        name = name.strip().lstrip("-")
        if not eq or not values.strip():
            raise UsageError(f"--grid {spec}: write NAME=V1,V2,... (e.g. --grid mss=536,1448)")
        if name not in actions:
            raise UsageError(f"--grid {spec}: {name!r} is not a simulate flag; use one of {', '.join(sorted(actions))}")
        if name in grid:
            raise UsageError(f"--grid {name} is given twice; put all its values in one --grid")
        grid[name] = [parse_value(name, actions[name], v.strip()) for v in values.split(",")]
        dests[name] = actions[name].dest
    return grid, dests


def scenario_factory(args, dests: dict[str, str]):
    """A function of the grid's names building the Scenario ``simulate`` would run."""
    def build(**point):
        ns = argparse.Namespace(**vars(args))
        for name, value in point.items():
            setattr(ns, dests[name], value)
        return simulate.scenario_from_args(ns)
    return build


def _fixed_conflicts(args, dests: dict[str, str]) -> None:
    defaults = vars(simulate_parser().parse_args([]))
    for name, dest in dests.items():
        if getattr(args, dest) != defaults[dest]:
            raise UsageError(f"--grid {name} and a fixed --{name} both set {name}; give one of them")


def run(args) -> int:
    from ..sweep import sweep, write_table            # pandas, dask and the simulator: only when the verb runs
    grid, dests = parse_grid(args.grid)
    _fixed_conflicts(args, dests)
    if args.out:
        if not args.out.endswith((".parquet", ".pq", ".csv")):
            raise UsageError(f"--out {args.out}: name the file .parquet or .csv")
        folder = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise UsageError(f"--out {args.out}: folder {folder} does not exist or is not writable")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers {args.workers}: give at least 1")
    try:
        df = sweep(scenario_factory(args, dests), grid, args.scheduler, workers=args.workers, progress=args.progress)
    except ImportError as e:
        raise UsageError(str(e)) from None
    if args.out:
        write_table(df, args.out)
    if args.json:
        rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
                for r in df.to_dict("records")]
        print(json.dumps(rows, indent=1, default=_plain))
        return 0
    cols = list(grid) + ["goodput_bps", "retransmits", "drops", "completion_s", "worker"]
    table = df[cols].copy()
    table["goodput_bps"] = (table["goodput_bps"] / 1e6).round(3)
    print(table.rename(columns={"goodput_bps": "goodput_Mbps"}).to_string(index=False))
    if args.out:
        print(f"wrote {len(df)} rows to {args.out}")
    return 0


def _plain(value):
    """numpy scalars -> Python numbers for json."""
    return value.item() if hasattr(value, "item") else str(value)
