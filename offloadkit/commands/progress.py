"""Progress bars on stderr for the capture verbs (``--progress``, or when stderr is a terminal).

Not a verb: ``cli.VERBS`` lists the verbs. A bar appears only for work that lasts over
a second (tqdm's ``delay``) and shows packets done, rate and ETA; stdout never changes.
"""
from __future__ import annotations

import sys
from typing import Callable, Iterable


def add_progress_arg(parser) -> None:
    parser.add_argument("--progress", action="store_true",
                        help="show a progress bar on stderr (default: only when stderr is a terminal)")


def bar(args, total: int, what: str) -> Callable[[Iterable], Iterable]:
    """A wrapper for an iterable of ``total`` packets that draws the bar, or the identity."""
    if not (getattr(args, "progress", False) or sys.stderr.isatty()):
        return lambda it: it
    from tqdm import tqdm

    return lambda it: tqdm(it, total=total, desc=what, unit=" pkt", unit_scale=True, file=sys.stderr, delay=1.0,
                           mininterval=0.25, leave=False)


class _Silent:
    """A counter that draws nothing."""

    total = n = 0

    def update(self, n: int = 1) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def counter(args, total: int, what: str):
    """A context manager counting ``total`` packets with ``update(n)`` (a tqdm bar on stderr, or silent)."""
    if not (getattr(args, "progress", False) or sys.stderr.isatty()):
        return _Silent()
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit=" pkt", unit_scale=True, file=sys.stderr, delay=1.0,
                mininterval=0.25, leave=False)
