"""Compile every numba kernel once so that later imports load them from the cache.

``offloadkit warmup`` (or ``python -m offloadkit.warmup``) is run by ``make lab``/``make test``
and by Binder's postBuild. Each engine module that has kernels defines ``warmup()``,
which calls them on tiny inputs with every signature in use. :func:`run` reports each
module as it goes (``[3/10] gro 12.3 s``). :func:`build_aot` then records the capture verbs on
the shipped captures and compiles the kernels they call ahead of time (``offloadkit.aot``).
"""
from __future__ import annotations

import contextlib
import gzip
import importlib
import io
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULES = [
    "offloadkit.engine.csum_math",
    "offloadkit.engine.segment",
    "offloadkit.engine.path",
    "offloadkit.engine.checksum",
    "offloadkit.engine.gro",
    "offloadkit.io.capture",
    "offloadkit.doctor.context",   # the capture verbs' kernels are ready: build_aot starts here
    "offloadkit.engine.lro",
    "offloadkit.sim.simulate",  # the TCP loop (engine.tcp) on a tiny scenario
    "offloadkit.engine.cpu",
    "offloadkit.ui.offline",   # caches altair's offline JupyterChart bundle (not numba)
    "offloadkit.ui.live_chart",   # and the dashboards' LiveChart bundle
]


AOT_AFTER = "offloadkit.doctor.context"


def run(progress=None, after=None) -> list[str]:
    """Import each module of MODULES and call its ``warmup()``; ``progress(line)`` after each,
    ``after()`` once the capture verbs' kernels are warm (``AOT_AFTER``, else at the end).
    Returns the short names of the modules warmed."""
    start = time.perf_counter()
    warmed = []
    for i, name in enumerate(MODULES, 1):
        t0 = time.perf_counter()
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:
                continue
            raise
        if hasattr(mod, "warmup"):
            mod.warmup()
            warmed.append(name.rsplit(".", 1)[-1])
            if progress:
                progress(f"[{i}/{len(MODULES)}] {name.removeprefix('offloadkit.'):<20} "
                         f"{time.perf_counter() - t0:5.1f} s")
        if after and name == AOT_AFTER:
            after, _ = None, after()
    if after:
        after()
    if progress:
        progress(f"numba kernels ready ({', '.join(warmed) or 'none'}) in {time.perf_counter() - start:.1f} s")
    return warmed


def recorded_inputs(folder: Path) -> list[Path]:
    """Every shipped capture (pcap: plain, tunnels, overlays, IPv6), and the first as pcapng,
    pcapng.gz and pcap.gz written into ``folder``."""
    from .io import capture, pcapng
    from .resources import data_dir
    shipped = sorted((data_dir() / "captures").rglob("*.pcap"))
    recs, info = capture.read_records(shipped[0])
    ng = folder / "first.pcapng"
    pcapng.write_records(ng, recs, info.snaplen or 262144, nano=False)
    (folder / "first.pcapng.gz").write_bytes(gzip.compress(ng.read_bytes()))
    (folder / "first.pcap.gz").write_bytes(gzip.compress(shipped[0].read_bytes()))
    return [*shipped, ng, folder / "first.pcapng.gz", folder / "first.pcap.gz"]


def recorded_verbs(folder: Path) -> list[list[str]]:
    """The command lines whose Python-called kernels are compiled ahead of time: ``gro``,
    ``segment`` and ``doctor`` on every input of :func:`recorded_inputs`. (``trace`` and
    ``export`` run the TCP simulator, which stays on numba: see ``aot_build``.)"""
    from .aot import VERBS
    out = str(folder / "out.pcap")
    args = {"gro": [out], "segment": [out, "--mss", "1000"], "doctor": ["--json"]}
    return [[verb, str(src), *args[verb]] for src in recorded_inputs(folder) for verb in VERBS]


def build_aot(progress=None) -> int:
    """Record :func:`recorded_verbs` in numba mode and build the AOT module (``aot_build``);
    0 when built, 1 when it could not be (one line says why; the kit runs on numba)."""
    from . import aot_build
    from .packet import jit
    from .cli import main as cli_main
    say = progress or (lambda line: None)
    if jit.EXPORTS is not None:
        raise RuntimeError("build_aot needs numba mode: set OFFLOADKIT_AOT=0 before importing offloadkit's kernels")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="offloadkit-record-") as tmp, aot_build.recording() as calls:
        for argv in recorded_verbs(Path(tmp)):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
                status = cli_main(argv)
            if status not in (0, 1):
                say(f"warmup: recording `offloadkit {' '.join(argv)}` exited {status}: {err.getvalue()[-300:]}")
    t1 = time.perf_counter()
    say(f"recorded {sum(map(len, calls.values()))} signatures of {len(calls)} kernels in {t1 - t0:.1f} s")
    try:
        so, left = aot_build.build(calls)
    except Exception as e:          # no compiler, no Python headers, or pycc refused a kernel
        say(f"warmup: kernels not compiled ahead of time ({type(e).__name__}: {str(e)[:300]}); "
            "the kit runs on numba as before")
        return 1
    say(f"compiled ahead of time into {so} in {time.perf_counter() - t1:.1f} s "
        f"({len(left)} kernel/signature group(s) left to numba)")
    return 0


class AotChild:
    """``build_aot`` in a child process (numba mode), so it runs on the second core while this
    process warms the remaining modules; :meth:`wait` relays its lines."""

    def __init__(self):
        self.proc = None

    def start(self) -> None:
        env = {**os.environ, "OFFLOADKIT_AOT": "0"}
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-m", "offloadkit.warmup", "--aot-only"], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait(self, progress=None) -> int:
        if self.proc is None:
            return 1
        status = self.proc.wait()
        self.log.seek(0)
        for line in self.log.read().splitlines():
            if progress:
                progress(line)
        self.log.close()
        return status


def main(argv: list[str] | None = None) -> int:
    """``python -m offloadkit.warmup [--aot-only]``: the numba warmup, then the AOT module."""
    argv = sys.argv[1:] if argv is None else argv
    say = lambda line: print(line, file=sys.stderr, flush=True)
    if argv == ["--aot-only"]:
        os.environ["OFFLOADKIT_AOT"] = "0"
        return build_aot(progress=say)
    return warm_all(progress=say)


def warm_all(progress=None) -> int:
    """:func:`run`, with :func:`build_aot` in a child process from ``AOT_AFTER`` on unless
    ``OFFLOADKIT_AOT=0``; this process stays in numba mode. 0, or 1 if the build failed."""
    build = os.environ.get("OFFLOADKIT_AOT", "1") != "0"
    os.environ["OFFLOADKIT_AOT"] = "0"
    child = AotChild()
    run(progress=progress, after=child.start if build else None)
    return child.wait(progress) if build else 0


if __name__ == "__main__":
    sys.exit(main())
