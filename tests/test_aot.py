"""Kernels compiled ahead of time (offloadkit.aot, offloadkit.packet.jit): the same bytes as numba,
no numba import for the capture verbs, a stale module ignored, numba for everything not exported."""
from __future__ import annotations

import importlib
import importlib.machinery
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from offloadkit import aot, numba_cache
from offloadkit.packet import jit
from offloadkit.resources import data_dir

ROOT = Path(__file__).resolve().parents[1]
CAPS = data_dir() / "captures"


def built_module() -> Path:
    """This install's AOT module (``offloadkit warmup`` builds it; CI runs warmup first)."""
    so, table = aot.paths(numba_cache.aot_dir(), aot.fingerprint())
    if not so.is_file():
        if shutil.which("gcc") is None and shutil.which("cc") is None:
            pytest.skip("no C compiler: warmup cannot build the AOT module")
        pytest.fail(f"no AOT module {so.name} for these sources: run `offloadkit warmup`")
    return table


def test_arg_keys_are_numbas_type_names():
    numba = pytest.importorskip("numba")
    base = np.zeros((4, 6), dtype=np.int64)
    ro = np.zeros(3, dtype=np.uint8)
    ro.flags.writeable = False
    unaligned = np.frombuffer(bytearray(17), dtype=np.uint8)[1:9].view(np.int64)
    values = [base, base.T, base[:, ::2], base[0], np.zeros(0, np.float32), np.zeros((2, 2, 2), np.bool_), ro,
              unaligned, 7, -2**63, True, 2.5, np.int32(3), np.uint16(4), np.float32(1), np.bool_(True)]
    for v in values:
        assert aot.arg_key(v) == str(numba.typeof(v)), v
        assert aot.exportable(aot.arg_key(v))
    for v in (None, (1, 2), b"x", "s", 2**64 - 1, np.zeros(2, dtype=[("a", "i4")])):
        assert aot.arg_key(v) is None or not aot.exportable(aot.arg_key(v))


FAKE = '''
from offloadkit.packet.jit import njit

@njit(cache=False)
def twice(x):
    return 2 * x

@njit(cache=False, inline="always")
def add(a, b):
    return a + b

@njit(cache=False)
def total(a):
    s = 0
    for v in a:
        s = add(s, twice(v))
    return s
'''


def test_entry_points_by_type_and_numba_for_the_rest(tmp_path, monkeypatch):
    (tmp_path / "okaot_fake.py").write_text(textwrap.dedent(FAKE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(jit, "EXPORTS", {"okaot_fake:twice": [(("int64",), lambda x: ("entry", x))]})
    monkeypatch.setattr(jit, "FALLBACKS", [])
    sys.modules.pop("okaot_fake", None)
    fake = importlib.import_module("okaot_fake")
    assert isinstance(fake.twice, jit.Kernel) and isinstance(fake.total, jit.Kernel)
    assert fake.twice(21) == ("entry", 21)                 # the exported types: the entry point
    assert fake.twice(x=21) == ("entry", 21)
    assert fake.twice(1.5) == 3.0                          # other types: numba
    assert fake.total(np.arange(5)) == 20                   # not exported, calls kernels: numba for all
    assert any(f.startswith("okaot_fake:total (array(int64, 1d, C))") for f in jit.FALLBACKS)
    assert fake.twice.py_func(4) == 8 and fake.total.signatures    # numba's attributes pass through
    sys.modules.pop("okaot_fake", None)


def test_a_changed_kernel_source_or_another_install_finds_no_module(tmp_path):
    pkg = tmp_path / "offloadkit"
    shutil.copytree(numba_cache.PACKAGE, pkg, ignore=shutil.ignore_patterns("data", "__pycache__"))
    assert aot.fingerprint(pkg) == aot.fingerprint()         # content and relative paths, not where
    gro = pkg / "engine" / "gro.py"
    gro.write_text(gro.read_text() + "\n# changed\n")
    assert aot.fingerprint(pkg) != aot.fingerprint()
    table = built_module()
    other = tmp_path / "other"
    other.mkdir()
    so = table.with_name(table.stem + importlib.machinery.EXTENSION_SUFFIXES[0])
    stale_so, stale_table = aot.paths(other, "0" * 20)
    shutil.copy(so, stale_so)
    shutil.copy(table, stale_table)
    assert aot.load(other) is None                            # built from other sources: ignored
    assert json.loads(table.read_text())["kernels"]


VERBS = '''
import json, sys
from offloadkit.cli import main
caps, report = sys.argv[1], sys.argv[2]   # outputs in the working folder
res = {}
for i, argv in enumerate([["gro", f"{caps}/ts-mtu1500/router-out.pcap", "gro.pcap"],
                          ["segment", f"{caps}/ts-mtu1500/router-in.pcap", "seg.pcap", "--mss", "1448"],
                          ["gro", f"{caps}/ipv6/v6-ts-mtu1500/router-out.pcap", "gro6.pcap"],
                          ["doctor", f"{caps}/tunnel/vxlan6-ts-mtu1500/rcv.pcap", "--json"]]):
    import contextlib, io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        res[i] = main(argv)
    open(f"{i}.txt", "w").write(buf.getvalue())
res["numba"] = "numba" in sys.modules
res["export"] = main(["export", report, "export.pcap", "-n", "200"])
print(json.dumps(res))
'''


def run_verbs(out: Path, aot_on: bool) -> dict:
    out.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OFFLOADKIT_AOT": "1" if aot_on else "0",
           "HOME": str(Path.home())}
    p = subprocess.run([sys.executable, "-c", VERBS, str(CAPS), "rtl8139"], capture_output=True,
                       text=True, timeout=600, env=env, cwd=out)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.splitlines()[-1])


def test_compiled_kernels_write_the_bytes_numba_writes_without_importing_numba(tmp_path):
    built_module()
    with_aot, with_numba = run_verbs(tmp_path / "aot", True), run_verbs(tmp_path / "numba", False)
    assert with_aot["numba"] is False, "gro/segment/doctor imported numba with the AOT module there"
    assert with_numba["numba"] is True
    assert {k: v for k, v in with_aot.items() if k != "numba"} == {k: v for k, v in with_numba.items() if k != "numba"}
    for name in ("gro.pcap", "seg.pcap", "gro6.pcap", "export.pcap", "0.txt", "1.txt", "2.txt", "3.txt"):
        a, b = (tmp_path / "aot" / name).read_bytes(), (tmp_path / "numba" / name).read_bytes()
        assert a == b, name
    assert (tmp_path / "aot" / "gro.pcap").stat().st_size > 1000
