"""``offloadkit reproduce [--report ID] [--json] [--quiet]``: the five reports, report vs model.

Each report's preset (``offloadkit.reports.<id>``) runs its variants and checks
every target of ``data/reports/<id>.json``; a table row says whether the model
value was fitted to the report or predicted. Exit status 0 when every row is
within tolerance, 1 otherwise. ``--quiet`` prints only the rows out of tolerance and the last line (and no compile note).
"""
from __future__ import annotations

import json
import time

from ..reports.facts import REPORT_IDS
from .options import add_quiet, report_id


def configure(parser) -> None:
    parser.add_argument("--report", action="append", type=report_id, metavar="ID",
                        help=f"only this report (repeatable): {', '.join(REPORT_IDS)} or its number 000-004")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON list of rows (report, quantity, unit, reported, model, "
                             "tolerance, ok, role)")
    parser.add_argument("--no-source", action="store_true", help="leave the source column out of the tables")
    add_quiet(parser)


def run(args) -> int:
    from ..reports import presets, reproduce
    t0 = time.perf_counter()
    tables = list(reproduce(args.report).items())
    ok = all(t.all_ok for _, t in tables)
    if args.json:
        print(json.dumps([rec for _, t in tables for rec in t.to_records()], indent=1, ensure_ascii=False))
        return 0 if ok else 1
    for rid, t in ([] if args.quiet else tables):
        print(t.render(source=not args.no_source))
        fits = getattr(presets.get(rid), "calibrate", None)
        if fits is not None:
            for f in fits().values():
                print(f"  fitted parameter: {f.text()}")
        print()
    if args.quiet:
        for rid, t in tables:
            for r in t.rows:
                if not r.ok:
                    print(f"FAIL {rid}: {r.quantity}: reported {r.reported}, model {r.model}")
    rows = [r for _, t in tables for r in t.rows]
    n_ok = sum(r.ok for r in rows)
    print(f"{n_ok}/{len(rows)} quantities within tolerance over {len(tables)} report(s) "
          f"({sum(r.role == 'fitted' for r in rows)} fitted, {sum(r.role == 'predicted' for r in rows)} predicted) "
          f"in {time.perf_counter() - t0:.1f} s")
    return 0 if ok else 1
