"""Fuzz harness: mutated captures through the reader, ``gro``, ``segment`` and ``doctor``,
random command lines through ``export``; counts cases, exit codes and tracebacks.

Corpus: every capture in offloadkit/data/captures and tests/data (cut to their first
records), plus generated files (a multi-link-type pcapng, an Ethernet pcap with an
FCS, times before 1970 and after 2106). Mutations: bit flips, extreme 16/32-bit
field values, truncation, chunk duplication and deletion, random insertions.
Every verb runs in-process through ``offloadkit.cli.main``, as a user's command
line does; anything but exit 0 or 2 (an uncaught exception: a traceback) counts as
a failure and its input is saved under ``--keep``.

    python tests/fuzz/harness.py --cases 10000            # make fuzz
    python tests/fuzz/harness.py --cases 50 --verbs gro   # a quick look
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import random
import struct
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from offloadkit.cli import main  # noqa: E402
from offloadkit.io import pcap, pcapng  # noqa: E402
from offloadkit.io.capture import read_capture, read_records  # noqa: E402
from offloadkit.io.records import Record  # noqa: E402
from offloadkit.reports import presets  # noqa: E402
from offloadkit.reports.facts import REPORT_IDS  # noqa: E402

VERBS = ("reader", "gro", "segment", "doctor", "export")
MAX_SEED_RECORDS = 60
EXTREMES16 = (0, 1, 0x7FFF, 0x8000, 0xFFFF)
EXTREMES32 = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF)


def _cut(path: Path) -> bytes:
    """A capture cut to its first records (written back in its own format)."""
    data = path.read_bytes()
    recs, info = read_records(data)
    if len(recs) <= MAX_SEED_RECORDS:
        return data
    with tempfile.NamedTemporaryFile(suffix=".cap") as f:
        if info.format == "pcapng":
            pcapng.write_records(f.name, recs[:MAX_SEED_RECORDS])
        else:
            pcap.write_records(f.name, recs[:MAX_SEED_RECORDS], info.linktype, info.snaplen or 262144, info.nano,
                               info.fcs[0] if info.fcs else 0)
        return Path(f.name).read_bytes()


def _generated(base: list[Record]) -> dict[str, bytes]:
    """Files the committed captures do not cover: mixed link types, FCS, times a pcap cannot hold."""
    out = {}
    with tempfile.TemporaryDirectory() as d:
        mixed = [Record(r.frame, r.time_ns, 276 if i % 2 else 1,
                        (b"\x08\x00\x00\x00\x00\x00\x00\x02\x00\x01\x06" + bytes(9) + r.data[14:]) if i % 2
                        else r.data, r.orig_len + (6 if i % 2 else 0)) for i, r in enumerate(base)]
        pcapng.write_records(f"{d}/mixed", mixed)
        fcs = [(r.time_ns, r.data + zlib.crc32(r.data).to_bytes(4, "little"), r.orig_len + 4) for r in base
               if len(r.data) == r.orig_len]
        pcap.write_records(f"{d}/fcs", fcs, fcs=4)
        pcapng.write_records(f"{d}/old", [Record(r.frame, r.time_ns - 10**19 // 4, r.linktype, r.data, r.orig_len)
                                          for r in base])
        pcapng.write_records(f"{d}/late", [Record(r.frame, r.time_ns + (1 << 32) * 10**9, r.linktype, r.data,
                                                  r.orig_len) for r in base])
        for name in ("mixed", "fcs", "old", "late"):
            out[f"generated/{name}"] = Path(f"{d}/{name}").read_bytes()
    return out


def corpus() -> dict[str, bytes]:
    """Seed files by name."""
    seeds = {}
    for path in sorted((ROOT / "offloadkit" / "data" / "captures").glob("*/*.pcap*")) + \
            sorted((ROOT / "tests" / "data").glob("*.pcap*")):
        seeds[str(path.relative_to(ROOT))] = _cut(path)
    base, _ = read_records(seeds["offloadkit/data/captures/ts-mtu1500/router-in.pcap"])
    seeds.update(_generated(base[:20]))
    return seeds


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four random mutations, biased to the first bytes of the file and of records."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            b += bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
            continue
        n = len(b)
        pos = rng.randrange(min(n, 200)) if rng.random() < 0.4 else rng.randrange(n)
        op = rng.randrange(7)
        if op == 0:
            b[pos] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[pos] = rng.randrange(256)
        elif op == 2 and pos + 2 <= n:
            struct.pack_into(rng.choice("<>") + "H", b, pos, rng.choice(EXTREMES16))
        elif op == 3 and pos + 4 <= n:
            struct.pack_into(rng.choice("<>") + "I", b, pos, rng.choice(EXTREMES32))
        elif op == 4:
            del b[rng.randrange(n):]
        elif op == 5:
            k = rng.randint(1, 64)
            b[pos:pos] = b[pos:pos + k]
        else:
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
    return bytes(b)


def _argv(verb: str, path: str, out: str, rng: random.Random) -> list[str]:
    if verb == "gro":
        extra = rng.choice([[], ["--poll-gap", "none"], ["--napi-budget", "1"], ["--rx-csum", "none"],
                            ["--max-size", "262144"], ["--hz", "250"]])
        return ["gro", path, out, *extra]
    if verb == "segment":
        extra = rng.choice([[], ["--no-tx-csum"], ["--fixed-id"], ["--nic", "rtl8139-legacy"]])
        return ["segment", path, out, "--mss", str(rng.choice([536, 1000, 1448, 8948])), *extra]
    return ["doctor", path, "--json"] if rng.random() < 0.5 else ["doctor", path]


def cache_preset_runs() -> None:
    """Each preset's simulation once per variant: ``export`` cases fuzz its arguments and its writer."""
    for rid in REPORT_IDS:
        mod = presets.get(rid)
        if not hasattr(mod.run, "cache_info"):
            mod.run = functools.lru_cache(maxsize=None)(mod.run)


def export_argv(out: str, rng: random.Random) -> list[str]:
    """A random, mostly valid, ``offloadkit export`` command line."""
    ids = list(REPORT_IDS)
    rid = rng.choice(ids + ["nope", ""])
    argv = ["export", rid, out]
    if rng.random() < 0.7 and rid in ids:
        mod = presets.get(rid)
        argv += ["--variant", rng.choice(list(mod.VARIANTS) + ["x"])]
        if rng.random() < 0.6:
            argv += ["--point", rng.choice(list(mod.POINTS) + ["?"])]
    if rng.random() < 0.5:
        argv += ["-n", rng.choice(["0", "1", "5", "-1", "1e3", "999999999999", "x"])]
    return argv


def run_cli(argv: list[str]) -> tuple[int | str, str]:
    """(exit status, or the exception's name; traceback text) of one in-process command line."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
        except Exception as e:  # noqa: BLE001 - counting exactly these is the point
            return type(e).__name__, traceback.format_exc()
    return int(code or 0), ""


def run_reader(data: bytes) -> tuple[int | str, str]:
    try:
        r = read_capture(data)
        read_records(data)
        assert r.trace is not None
        read_capture(data, fast=False)
        return 0, ""
    except Exception as e:  # noqa: BLE001
        return type(e).__name__, traceback.format_exc()


def fuzz(verbs, cases: int, seed: int, keep: Path | None, log=print) -> dict:
    """Run ``cases`` cases per verb; returns {verb: {"cases", "exits", "tracebacks", "examples"}}."""
    rng = random.Random(seed)
    seeds = corpus()
    names = sorted(seeds)
    report = {}
    with tempfile.TemporaryDirectory() as d:
        inp, out = f"{d}/in", f"{d}/out"
        for verb in verbs:
            exits, tb, examples = Counter(), 0, {}
            if verb == "export":
                cache_preset_runs()
            t0 = time.time()
            for i in range(cases):
                if verb == "export":
                    argv = export_argv(out, rng)
                    code, text = run_cli(argv)
                    data = json.dumps(argv).encode()
                else:
                    name = rng.choice(names)
                    data = mutate(seeds[name], rng) if rng.random() < 0.9 else seeds[name]
                    Path(inp).write_bytes(data)
                    code, text = run_reader(data) if verb == "reader" else run_cli(_argv(verb, inp, out, rng))
                exits[str(code)] += 1
                if not (code == 0 or code == 2):
                    tb += 1
                    sig = text.strip().splitlines()[-1][:160] if text else str(code)
                    examples.setdefault(sig, 0)
                    examples[sig] += 1
                    if keep is not None:
                        keep.mkdir(parents=True, exist_ok=True)
                        (keep / f"{verb}-{i}.bin").write_bytes(data)
                        (keep / f"{verb}-{i}.txt").write_text(text)
            report[verb] = {"cases": cases, "exits": dict(exits), "tracebacks": tb, "examples": examples,
                            "seconds": round(time.time() - t0, 1)}
            log(f"{verb:8s} {cases:6d} cases  exits {dict(exits)}  tracebacks {tb}  "
                f"({report[verb]['seconds']} s)")
            for sig, k in examples.items():
                log(f"         {k:5d} x {sig}")
    return report


def cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000, help="cases per verb (default 10000)")
    ap.add_argument("--verbs", default=",".join(VERBS), help=f"comma-separated, of {', '.join(VERBS)}")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None, help="save failing inputs and tracebacks here")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    verbs = [v for v in a.verbs.split(",") if v]
    bad = set(verbs) - set(VERBS)
    if bad:
        ap.error(f"unknown verbs {sorted(bad)}")
    rep = fuzz(verbs, a.cases, a.seed, a.keep)
    if a.json:
        print(json.dumps(rep))
    return 1 if any(v["tracebacks"] for v in rep.values()) else 0


if __name__ == "__main__":
    sys.exit(cli())
