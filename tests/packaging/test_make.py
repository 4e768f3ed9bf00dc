"""The Makefile's recipes (dry runs, `make -n`): lab passes Jupyter options and --allow-root as
root only; lab installs [lab] without the test extras; test lints, warms up the checkout while the
wheel is built, installed and warmed up beside it, runs the suite, then checks the wheel."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
pytestmark = pytest.mark.skipif(MAKE is None, reason="make is not installed")


def dry(target: str, *extra: str, venv: Path) -> list[str]:
    out = subprocess.run([MAKE, "-n", "-C", str(ROOT), target, f"VENV={venv}", *extra], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_lab_takes_jupyter_options_and_allows_root_only_as_root(tmp_path):
    lines = dry("lab", "ARGS=--port 8899 --no-browser", venv=tmp_path / "v")
    jupyter = [line for line in lines if "jupyter lab" in line]
    assert len(jupyter) == 1 and jupyter[0].endswith("--port 8899 --no-browser")
    assert ("--allow-root" in jupyter[0]) == (os.geteuid() == 0)
    assert any("offloadkit warmup" in line for line in lines)
    installs = [line for line in lines if "pip install" in line and "-e" in line]
    assert installs and all("'.[lab]'" in line for line in installs), installs


def test_test_target_lints_runs_the_suite_and_checks_the_wheel(tmp_path):
    lines = dry("test", venv=tmp_path / "v")
    text = "\n".join(lines)
    assert "'.[lab,test,browser,docs,dask]'" in text and "ruff check ." in text
    order = [next(i for i, line in enumerate(lines) if key in line)
             for key in ("ruff check", "wheel-check --prepare", "offloadkit warmup", "pytest tests",
                         "wheel-check --check")]
    assert order == sorted(order)
    # the wheel's preparation runs in the background beside the checkout's warmup, and is waited for
    prepare = next(line for line in lines if "wheel-check --prepare" in line)
    assert "& prep=$!" in prepare and any("wait $prep" in line for line in lines[:order[3]])
