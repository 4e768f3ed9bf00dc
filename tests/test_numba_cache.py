"""The in-tree numba cache is dropped when any source of the package changes."""
import os

from offloadkit import numba_cache


def make_package(root):
    (root / "engine" / "__pycache__").mkdir(parents=True)
    (root / "data").mkdir()
    (root / "engine" / "loop.py").write_text("from numba import njit\n")
    (root / "engine" / "sender.py").write_text("from numba import njit\n")
    (root / "engine" / "notes.py").write_text("TEXT = 'no kernels here'\n")
    return root


def cached(root):
    kernel = root / "engine" / "__pycache__" / "loop.run-1.py311.nbi"
    kernel.write_bytes(b"index")
    return kernel


def test_a_changed_callee_drops_the_cached_caller(tmp_path):
    pkg = make_package(tmp_path / "pkg")
    assert numba_cache.drop_stale_kernels(pkg)            # no stamp yet
    kernel = cached(pkg)
    assert not numba_cache.drop_stale_kernels(pkg) and kernel.exists()
    sender = pkg / "engine" / "sender.py"
    sender.write_text("from numba import njit  # changed\n")   # the callee, another file
    st = sender.stat()
    os.utime(sender, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert numba_cache.drop_stale_kernels(pkg) and not kernel.exists()


def test_only_numba_sources_count(tmp_path):
    pkg = make_package(tmp_path / "pkg")
    before = numba_cache.sources_fingerprint(pkg)
    (pkg / "data" / "extra.py").write_text("import numba\n")
    (pkg / "engine" / "notes.py").write_text("TEXT = 'still no kernels'\n")
    assert numba_cache.sources_fingerprint(pkg) == before
    (pkg / "engine" / "new.py").write_text("import numba\n")
    assert numba_cache.sources_fingerprint(pkg) != before
    with_kernel = numba_cache.sources_fingerprint(pkg)
    (pkg / "engine" / "help.py").write_text('"""compiles numba kernels on first use"""\nimport numbers\n')
    assert numba_cache.sources_fingerprint(pkg) == with_kernel     # names numba, imports none


def test_modules_taking_the_kits_njit_are_kernel_sources(tmp_path):
    pkg = make_package(tmp_path / "pkg")
    before = numba_cache.sources_fingerprint(pkg)
    (pkg / "engine" / "gro.py").write_text("import numpy as np\nfrom ..packet.jit import njit\n")
    assert numba_cache.sources_fingerprint(pkg) != before
