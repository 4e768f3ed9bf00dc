"""Run an ``offloadkit`` verb in-process for tests: (exit status, stderr text)."""
from __future__ import annotations

import contextlib
import io

from offloadkit.cli import main


def run_verb(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:  # argparse errors
            code = e.code if isinstance(e.code, int) else 2
    return int(code or 0), err.getvalue().strip()
