"""Check that a built wheel and sdist carry what the kit needs beyond its .py files.

``python tests/packaging/dist_contents.py DIST.whl DIST.tar.gz``: exit 1 naming what is missing.
The same lists are used by tests/packaging/test_dist_contents.py against the source tree.
"""
from __future__ import annotations

import sys
import tarfile
import zipfile
from pathlib import Path

# paths inside the package that must ship: data the library loads, the Voila template, the marker
PACKAGE_FILES = [
    "py.typed",
    "data/calibration.json",
    "data/reports/rtl8139.json", "data/reports/mpls.json", "data/reports/vxlan.json",
    "data/reports/splice.json", "data/reports/vlan-nat.json",
    "data/reports/rtl8139_guest.txt", "data/reports/rtl8139_macvtap.txt",
    "data/hosts/x86-2016-veth.json", "data/hosts/x86-2016-vm-host.json",
    "data/hosts/x86-2009-myri10ge.json", "data/hosts/bcm4708-router.json",
    "data/captures/ts-mtu1500/rcv.pcap", "data/captures/ts-mtu1500/settings.json",
    "ui/jupyter/voila/templates/offloadkit/conf.json",
    "ui/jupyter/voila/templates/offloadkit/index.html.j2",
    "ui/jupyter/voila/templates/offloadkit/page.html",
]


def missing_in_wheel(names: list[str]) -> list[str]:
    want = [f"offloadkit/{p}" for p in PACKAGE_FILES]
    want += ["share/jupyter/voila/templates/offloadkit/conf.json", "share/jupyter/voila/templates/offloadkit/page.html",
             "etc/jupyter/voila.json"]
    have = {n.split(".data/data/", 1)[-1] for n in names}
    out = [w for w in want if w not in have]
    if not any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names):
        out.append("LICENSE")
    return out


def missing_in_sdist(names: list[str]) -> list[str]:
    have = {n.split("/", 1)[1] for n in names if "/" in n}
    want = ["LICENSE", "README.md", "pyproject.toml", "CHANGELOG.md"] + [f"offloadkit/{p}" for p in PACKAGE_FILES]
    return [w for w in want if w not in have]


def main(paths: list[str]) -> int:
    bad = []
    for p in paths:
        if p.endswith(".whl"):
            gone = missing_in_wheel(zipfile.ZipFile(p).namelist())
        else:
            with tarfile.open(p) as t:
                gone = missing_in_sdist(t.getnames())
        print(f"{Path(p).name}: {'complete' if not gone else 'MISSING ' + ', '.join(gone)}")
        bad += gone
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
