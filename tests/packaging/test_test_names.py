"""Test modules outside packages are imported by basename, so two with one name stop collection."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_outside_packages_share_a_name():
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            by_name[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
