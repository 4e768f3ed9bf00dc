"""Idle kernels are culled on Binder (Jupyter Server) and in Voila apps, as README's Binder section says.

The config files are loaded the way Jupyter loads them (traitlets' JSON loader) into the
kernel manager classes that read them; binder/postBuild installs the server's file.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from jupyter_server.services.kernels.kernelmanager import MappingKernelManager
from traitlets.config.loader import JSONFileConfigLoader

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"binder": ROOT / "binder" / "jupyter_server_config.json",
           "voila": ROOT / "offloadkit" / "ui" / "jupyter" / "config" / "voila.json"}
WANT = {"cull_idle_timeout": 600, "cull_interval": 60, "cull_connected": True, "cull_busy": False}


def manager(path: Path) -> MappingKernelManager:
    cfg = JSONFileConfigLoader(path.name, str(path.parent)).load_config()
    return MappingKernelManager(config=cfg)


def test_binder_and_voila_cull_idle_kernels():
    for name, path in CONFIGS.items():
        km = manager(path)
        got = {k: getattr(km, k) for k in WANT}
        assert got == WANT, (name, got)


def test_voilas_own_kernel_manager_reads_it():
    factory = pytest.importorskip("voila.voila_kernel_manager").voila_kernel_manager_factory
    from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
    cfg = JSONFileConfigLoader("voila.json", str(CONFIGS["voila"].parent)).load_config()
    km = factory(AsyncMappingKernelManager, False, "python3")(config=cfg)   # what Voila 0.5 builds
    assert {k: getattr(km, k) for k in WANT} == WANT


def test_voila_still_uses_the_offline_template():
    cfg = JSONFileConfigLoader("voila.json", str(CONFIGS["voila"].parent)).load_config()
    assert cfg.VoilaConfiguration.template == "offloadkit"


def test_postbuild_installs_the_server_config_where_jupyter_server_reads_it():
    post = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"etc/jupyter/jupyter_server_config\.d", post)
    assert "cp binder/jupyter_server_config.json" in post


def test_readme_documents_the_culling():
    readme = (ROOT / "README.md").read_text()
    binder = readme[readme.index("### Binder"):readme.index("## Python API")]
    for key, value in WANT.items():
        assert f"{key} = {str(value).lower()}" in binder, key
    assert "binder/jupyter_server_config.json" in binder and "etc/jupyter/voila.json" in binder
