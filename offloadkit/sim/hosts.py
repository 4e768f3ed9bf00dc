"""Host profiles (``data/hosts/<name>.json``): every CPU constant with its source."""
from __future__ import annotations

import functools
import json
from pathlib import Path

from ..engine.cpu import Cost, HostProfile, StageSpec
from ..resources import data_dir


def hosts_dir() -> Path:
    return data_dir() / "hosts"


def list_hosts() -> list[str]:
    return sorted(p.stem for p in hosts_dir().glob("*.json"))


def _const(d: dict, key: str, where: str) -> float:
    try:
        rec = d[key]
        return float(rec["value"])
    except (KeyError, TypeError):
        raise ValueError(f"{where}: missing constant {key!r} (an object with value/unit/source)") from None


@functools.lru_cache(maxsize=16)
def _parsed(path: str, mtime_ns: int, size: int) -> dict:
    """The file's JSON, parsed once per version of the file (a dashboard loads its host on every change).
    Treat it as read-only: ``load_host`` copies what it keeps."""
    return json.loads(Path(path).read_text())


def load_host(name: str | Path) -> HostProfile:
    """Load a host profile by name (``list_hosts()``) or path."""
    path = Path(name)
    if not path.suffix:
        path = hosts_dir() / f"{name}.json"
    if not path.exists():
        raise ValueError(f"no host profile {str(name)!r}; available: {list_hosts()}")
    st = path.stat()
    d = _parsed(str(path), st.st_mtime_ns, st.st_size)
    where = path.name
    consts = {}
    for k, v in d.items():
        if isinstance(v, dict) and "value" in v:
            consts[k] = dict(v)
    mem_raw = d.get("memory", {})
    memory = {k: float(v["value"]) for k, v in mem_raw.items()}
    consts.update({f"memory.{k}": dict(v) for k, v in mem_raw.items()})
    miss_ns = memory.get("miss_ns", 0.0)
    stages = {}
    for sname, sd in d["stages"].items():
        costs = []
        for c in sd["costs"]:
            if "source" not in c:
                raise ValueError(f"{where}: stage {sname} symbol {c.get('symbol')} has no source")
            if c["per"] == "miss_line":
                value = float(c["weight"]) * miss_ns
            else:
                value = float(c["value"])
            costs.append(Cost(c["symbol"], c["per"], value, c.get("status", "estimated"),
                              c["source"], c.get("derivation", "")))
        stages[sname] = StageSpec(sname, sd["context"], tuple(costs))
    contexts = {k: int(v["cores"]) for k, v in d["contexts"].items()}
    for s in stages.values():
        if s.context not in contexts:
            raise ValueError(f"{where}: stage {s.name} runs in unknown context {s.context!r}")
    return HostProfile(
        name=d["name"], title=d["title"], report=d.get("report", ""),
        clock_hz=_const(d, "clock_hz", where), cores=int(_const(d, "cores", where)),
        perf_cpus=int(_const(d, "perf_cpus", where)), link_bps=_const(d, "link_bps", where),
        csum_ns_per_byte=_const(d, "csum_ns_per_byte", where),
        contexts=contexts, stages=stages, memory=memory, constants=consts)
