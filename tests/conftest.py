"""Make ``tests/`` importable from every test folder (``from reference.tcp_ref import ...``)."""
import pathlib
import sys

_TESTS = str(pathlib.Path(__file__).parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
