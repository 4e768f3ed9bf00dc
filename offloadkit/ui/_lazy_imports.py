"""Defer one expensive, unused-at-import dependency of altair: ``rfc3987_syntax``.

altair imports jsonschema, whose format checker imports ``rfc3987_syntax`` if it
is installed (it is, in every Jupyter environment: jupyter_events requires
``jsonschema[format-nongpl]``). That module builds an Earley parser for the IRI
grammar at import time: 1.1 s on an idle machine, 3 s on a busy one, more than
the rest of a dashboard's start-up. The kit never validates the "iri" format,
so :func:`defer_rfc3987_syntax` registers a stand-in module whose
``is_valid_syntax`` imports the real module on first use and then behaves
exactly like it. Nothing changes if the module is already imported or missing.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import types

_NAME = "rfc3987_syntax"


class _Deferred(types.ModuleType):
    """Stands in for ``rfc3987_syntax`` until something actually uses it."""

    def _real(self):
        if sys.modules.get(_NAME) is self:
            del sys.modules[_NAME]
        try:
            real = importlib.import_module(_NAME)
        except BaseException:
            sys.modules.setdefault(_NAME, self)
            raise
        return real

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._real(), name)


def defer_rfc3987_syntax() -> bool:
    """Install the stand-in (before altair/jsonschema are imported); True if it was installed."""
    if _NAME in sys.modules or "jsonschema" in sys.modules or importlib.util.find_spec(_NAME) is None:
        return False
    stub = _Deferred(_NAME, __doc__)

    def is_valid_syntax(term: str, value: str) -> bool:
        return stub._real().is_valid_syntax(term, value)

    stub.is_valid_syntax = is_valid_syntax
    sys.modules[_NAME] = stub
    return True
