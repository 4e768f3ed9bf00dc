"""Tests live in folders that mirror the package; ``tests/`` itself is on sys.path so that
``reference.*`` (the plain-Python oracles) and ``dashboard_helpers`` import from any of them."""
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
