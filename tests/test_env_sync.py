"""pyproject.toml, environment.yml and binder/environment.yml list the same dependencies.

pyproject.toml is the source of truth: each conda file lists every runtime
dependency with the same version floor, and anything else it lists (besides
python and pip) is one of pyproject's optional dependencies, with the same floor.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
ENV_FILES = ["environment.yml", "binder/environment.yml"]
_REQ = re.compile(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_requirements(reqs) -> dict[str, str]:
    """{normalised name: version specifier without spaces} for PEP 508 / conda match specs."""
    out = {}
    for req in reqs:
        if not isinstance(req, str):  # a nested "pip:" list
            continue
        req = req.split(";")[0].split("[")[0] if "[" in req else req.split(";")[0]
        m = _REQ.match(req)
        assert m, f"cannot parse requirement {req!r}"
        out[_norm(m.group(1))] = m.group(2).replace(" ", "")
    return out


def pyproject():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = parse_requirements(data["dependencies"])
    extras = {}
    for group in data.get("optional-dependencies", {}).values():
        extras.update(parse_requirements(group))
    return data, runtime, extras


def conda_env(path: str) -> dict[str, str]:
    env = yaml.safe_load((ROOT / path).read_text())
    assert "conda-forge" in env.get("channels", []), f"{path}: use the conda-forge channel"
    return parse_requirements(env["dependencies"])


@pytest.mark.parametrize("path", ENV_FILES)
def test_conda_env_lists_every_runtime_dependency(path):
    _, runtime, _ = pyproject()
    env = conda_env(path)
    missing = sorted(set(runtime) - set(env))
    assert not missing, f"{path} lacks runtime dependencies of pyproject.toml: {missing}"
    differ = {n: (runtime[n], env[n]) for n in runtime if runtime[n] != env[n]}
    assert not differ, f"{path}: version specifiers differ from pyproject.toml (pyproject, conda): {differ}"


@pytest.mark.parametrize("path", ENV_FILES)
def test_conda_env_lists_nothing_pyproject_does_not_know(path):
    _, runtime, extras = pyproject()
    env = conda_env(path)
    known = {**extras, **runtime}
    unknown = sorted(set(env) - set(known) - {"python", "pip"})
    assert not unknown, f"{path} lists packages pyproject.toml does not declare: {unknown}"
    differ = {n: (known[n], env[n]) for n in env if n in known and known[n] != env[n]}
    assert not differ, f"{path}: version specifiers differ from pyproject.toml: {differ}"


def test_binder_pins_python_exactly():
    # repo2docker reads the version with r"python\s*=+\s*([\d\.]*)": "python>=3.11" would be ignored.
    env = conda_env("binder/environment.yml")
    assert re.fullmatch(r"=\d+\.\d+", env.get("python", "")), "binder/environment.yml must pin python=X.Y"


def test_python_pins_satisfy_requires_python():
    data, _, _ = pyproject()
    floor = tuple(int(x) for x in re.search(r">=\s*(\d+)\.(\d+)", data["requires-python"]).groups())
    for path in ENV_FILES:
        pin = conda_env(path)["python"]
        version = tuple(int(x) for x in re.search(r"(\d+)\.(\d+)", pin).groups())
        assert version >= floor, f"{path}: python {pin} is below requires-python {data['requires-python']}"


def test_binder_scripts():
    post = (ROOT / "binder/postBuild").read_text()
    start = (ROOT / "binder/start").read_text()
    assert "set -e" in post and "pip install --no-deps -e ." in post
    assert "NUMBA_CPU_NAME=generic" in post and "offloadkit.warmup" in post
    assert "NUMBA_NUM_THREADS=1" in start and "NUMBA_CPU_NAME=generic" in start
    assert start.rstrip().endswith('exec "$@"')
    for name in ("postBuild", "start"):
        assert (ROOT / "binder" / name).stat().st_mode & 0o111, f"binder/{name} must be executable"
