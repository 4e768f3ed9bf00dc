"""pyproject.toml, environment.yml and binder/environment.yml list the same dependencies.

pyproject.toml is the source of truth. environment.yml (classroom conda) lists every runtime
dependency with pyproject's floor, and anything else it lists is one of pyproject's extras with
the same floor. binder/environment.yml pins exactly (``name==version`` from a tested install):
every runtime and ``[lab]`` dependency, each pin inside pyproject's range, nothing unknown.
"""
from __future__ import annotations

import re
from pathlib import Path

import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
ENV_FILES = ["environment.yml", "binder/environment.yml"]
BINDER = "binder/environment.yml"
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


def test_conda_env_lists_every_runtime_dependency():
    _, runtime, _ = pyproject()
    env = conda_env("environment.yml")
    missing = sorted(set(runtime) - set(env))
    assert not missing, f"environment.yml lacks runtime dependencies of pyproject.toml: {missing}"
    differ = {n: (runtime[n], env[n]) for n in runtime if runtime[n] != env[n]}
    assert not differ, f"environment.yml: version specifiers differ from pyproject.toml (pyproject, conda): {differ}"


def test_conda_env_lists_nothing_pyproject_does_not_know():
    _, runtime, extras = pyproject()
    env = conda_env("environment.yml")
    known = {**extras, **runtime}
    unknown = sorted(set(env) - set(known) - {"python", "pip"})
    assert not unknown, f"environment.yml lists packages pyproject.toml does not declare: {unknown}"
    differ = {n: (known[n], env[n]) for n in env if n in known and known[n] != env[n]}
    assert not differ, f"environment.yml: version specifiers differ from pyproject.toml: {differ}"


def binder_pins() -> dict[str, str]:
    """{normalised name: exact version} from binder/environment.yml's pip list."""
    env = yaml.safe_load((ROOT / BINDER).read_text())
    pips = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pips) == 1, f"{BINDER}: expected one pip: list"
    pins = {}
    for line in pips[0]:
        req = Requirement(line)
        spec = list(req.specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"{BINDER}: {line!r} is not an exact pin (name==version)"
        pins[_norm(req.name)] = spec[0].version
    return pins


def test_binder_pins_every_runtime_and_lab_dependency_exactly_within_pyproject():
    data, runtime, _ = pyproject()
    lab = parse_requirements(data["optional-dependencies"]["lab"])
    pins = binder_pins()
    wanted = {**runtime, **lab}
    missing = sorted(set(wanted) - set(pins))
    assert not missing, f"{BINDER} does not pin: {missing}"
    outside = {n: (pins[n], wanted[n]) for n in wanted if pins[n] not in SpecifierSet(wanted[n])}
    assert not outside, f"{BINDER}: pins outside pyproject's ranges (pin, range): {outside}"
    unknown = sorted(set(pins) - set(wanted))
    assert not unknown, f"{BINDER} pins packages that are neither runtime nor [lab] dependencies: {unknown}"


def test_binder_pins_python_exactly():
    # repo2docker reads the version with r"python\s*=+\s*([\d\.]*)": "python>=3.11" would be ignored.
    env = conda_env("binder/environment.yml")
    assert re.fullmatch(r"=\d+\.\d+", env.get("python", "")), "binder/environment.yml must pin python=X.Y"


def test_python_pins_satisfy_requires_python():
    data, _, _ = pyproject()
    allowed = SpecifierSet(data["requires-python"])
    for path in ENV_FILES:
        pin = re.search(r"(\d+\.\d+)", conda_env(path)["python"]).group(1)
        assert f"{pin}.0" in allowed, f"{path}: python {pin} is outside requires-python {data['requires-python']}"


def test_the_tested_python_is_the_claimed_one():
    # requires-python claims only what CI runs: this interpreter must satisfy it.
    import sys
    data, _, _ = pyproject()
    here = ".".join(map(str, sys.version_info[:3]))
    assert here in SpecifierSet(data["requires-python"]), (here, data["requires-python"])


def test_binder_scripts():
    post = (ROOT / "binder/postBuild").read_text()
    start = (ROOT / "binder/start").read_text()
    assert "set -e" in post and "pip install --no-deps -e ." in post
    assert "NUMBA_CPU_NAME=generic offloadkit warmup" in post
    assert "NUMBA_NUM_THREADS=1" in start and "NUMBA_CPU_NAME=generic" in start
    assert start.rstrip().endswith('exec "$@"')
    for name in ("postBuild", "start"):
        assert (ROOT / "binder" / name).stat().st_mode & 0o111, f"binder/{name} must be executable"
