"""What a new user does with an installed wheel, run by .ci/wheel-check inside the fresh venv,
from an empty folder with no checkout beside it (so nothing can be found by accident).

Exit 0 when: ``offloadkit --version`` prints the version, ``reproduce --json`` has every row
within tolerance, ``trace rtl8139`` prints tcpdump lines (and a closed pipe is quiet), ``doctor``
reads a packaged capture, and ``offloadkit.ui.dashboard(id)`` builds every dashboard with a result.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def sh(*args: str, ok=(0,)) -> subprocess.CompletedProcess:
    p = subprocess.run([str(BIN / "offloadkit"), *args], capture_output=True, text=True)
    if p.returncode not in ok:
        sys.exit(f"offloadkit {' '.join(args)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def main() -> None:
    import offloadkit
    here = Path.cwd().resolve()
    pkg = Path(offloadkit.__file__).resolve().parent
    assert "site-packages" in pkg.parts, f"offloadkit imported from {pkg}, not from the installed wheel"
    assert not (here / "offloadkit").exists() and "OFFLOADKIT_DATA" not in os.environ, "run from an empty folder"
    assert sh("--version").stdout.strip() == f"offloadkit {offloadkit.__version__}"
    print(f"version {offloadkit.__version__} from {pkg}")

    rows = json.loads(sh("reproduce", "--json").stdout)
    bad = [r for r in rows if not r["ok"]]
    assert rows and not bad, f"reproduce rows out of tolerance: {bad}"
    print(f"reproduce: {len(rows)} rows within tolerance")

    lines = sh("trace", "000", "-n", "5").stdout.splitlines()
    assert len(lines) == 5 and "Flags [S]" in lines[0], lines
    head = subprocess.run(f"'{BIN / 'offloadkit'}' trace rtl8139 -n 0 | head -1", shell=True,
                          capture_output=True, text=True)
    assert head.returncode == 0 and len(head.stdout.splitlines()) == 1 and "Traceback" not in head.stderr, head
    print("trace: tcpdump lines; closed pipe quiet")

    capture = next((pkg / "data" / "captures").glob("*/rcv.pcap"))
    sh("doctor", str(capture), ok=(0, 1))
    print(f"doctor: read {capture.relative_to(pkg)}")

    from offloadkit import ui
    for rid in ui.available():
        d = ui.dashboard(rid)
        assert d.result is not None and d.error is None, f"dashboard {rid}: {d!r}"
    print(f"dashboards: {', '.join(ui.available())} built with results")


if __name__ == "__main__":
    main()
