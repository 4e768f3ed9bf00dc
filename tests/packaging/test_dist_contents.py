"""The files a wheel must carry exist in the tree and are matched by pyproject's package-data;
the version has one source; the template Voila needs is declared as data-files too."""
from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import offloadkit
from dist_contents import PACKAGE_FILES, missing_in_sdist, missing_in_wheel

ROOT = Path(__file__).resolve().parents[2]
TOML = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _matches(path: str, pattern: str) -> bool:
    regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*", "[^/]*")
    return re.fullmatch(regex, path) is not None or fnmatch.fnmatch(path, pattern)


def test_every_needed_file_exists_and_is_declared_as_package_data():
    globs = TOML["tool"]["setuptools"]["package-data"]["offloadkit"]
    for rel in PACKAGE_FILES:
        assert (ROOT / "offloadkit" / rel).is_file(), rel
        assert any(_matches(rel, g) for g in globs), f"{rel} is not matched by package-data {globs}"


def test_version_has_one_source():
    assert TOML["project"]["dynamic"] == ["version"]
    assert TOML["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "offloadkit.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+)?", offloadkit.__version__)


def test_license_is_spdx_and_shipped():
    assert TOML["project"]["license"] == "BSD-3-Clause"
    assert "BSD 3-Clause" in (ROOT / "LICENSE").read_text()
    assert (ROOT / "offloadkit" / "py.typed").is_file()


def test_the_checkers_notice_a_gap():
    data = "offloadkit-0.data/data/"
    names = [f"offloadkit/{p}" for p in PACKAGE_FILES] + ["x.dist-info/licenses/LICENSE", f"{data}etc/jupyter/voila.json"]
    names += [f"{data}share/jupyter/voila/templates/offloadkit/{f}" for f in ("conf.json", "page.html")]
    assert missing_in_wheel(names) == []
    assert missing_in_wheel(names[1:]) == [f"offloadkit/{PACKAGE_FILES[0]}"]
    sdist = [f"offloadkit-0/{n}" for n in ["LICENSE", "README.md", "pyproject.toml", "CHANGELOG.md"]]
    assert missing_in_sdist(sdist + [f"offloadkit-0/offloadkit/{p}" for p in PACKAGE_FILES]) == []
    assert "LICENSE" in missing_in_sdist(sdist[1:])
