"""A finding: one thing the doctor noticed, in plain words, with its evidence."""
from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("info", "warning", "error")
MAX_FRAMES = 12            # packet numbers quoted per finding


@dataclass
class Finding:
    """``kind``: a stable identifier; ``severity``: info | warning | error; ``evidence``:
    numbers and packet numbers (the capture's ``frame`` column, 1-based) backing ``message``."""

    kind: str
    severity: str
    message: str
    evidence: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")

    def to_dict(self) -> dict:
        return {"kind": self.kind, "severity": self.severity, "message": self.message,
                "evidence": plain(self.evidence)}


def frames(values, limit: int = MAX_FRAMES) -> list[int]:
    """The first ``limit`` packet numbers of ``values`` as plain ints."""
    return [int(v) for v in list(values[:limit])]


def plain(x):
    """Evidence as JSON-serialisable built-ins (numpy scalars and arrays converted)."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if hasattr(x, "tolist"):
        return plain(x.tolist())
    if isinstance(x, float):
        return round(x, 6)
    return x
