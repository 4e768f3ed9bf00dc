"""Browser tests: JupyterLab and Voila on localhost, driven by Debian's chromium via Playwright.

Never ``playwright install``: the browser is /usr/bin/chromium (``apt-get install chromium``).
Every request that does not go to the local server is aborted and recorded; the tests
assert that there were none (the kit must work offline, without a CDN).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "00-offloads-101.ipynb"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="session")
def playwright_browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """A scratch copy of the notebook (the servers may autosave) and isolated Jupyter settings."""
    d = tmp_path_factory.mktemp("browser")
    (d / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, d / "notebooks" / NOTEBOOK)
    settings = d / "lab-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    (d / "workspaces").mkdir()
    return d


def _env(workdir: Path) -> dict:
    env = dict(os.environ, NUMBA_NUM_THREADS="1",
               JUPYTERLAB_SETTINGS_DIR=str(workdir / "lab-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(workdir / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(workdir / "runtime"))
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    # The servers and their kernels import this tree's offloadkit, and only it: a folder holding
    # a link to the package, not the tree root (whose voila.py, the Voila config, would shadow voila).
    path = workdir / "pythonpath"
    path.mkdir(exist_ok=True)
    if not (path / "offloadkit").exists():
        (path / "offloadkit").symlink_to(ROOT / "offloadkit", target_is_directory=True)
    env["PYTHONPATH"] = str(path)
    return env


class Server:
    def __init__(self, cmd: list[str], url: str, health: str, workdir: Path, log: Path):
        self.url, self.log = url, log
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(workdir), stdout=log.open("w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 90
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode}): {log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(health, timeout=2)
                return
            except urllib.error.HTTPError:  # any HTTP answer means the server is up
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"server not up after 90 s: {log.read_text()[-2000:]}")
                time.sleep(0.25)

    def stop(self):
        """Stop the server and its kernels: the process group this fixture created, by its id."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


def voila_folder_server(folder: Path, notebooks) -> Server:
    """Voila serving copies of ``notebooks`` (names under notebooks/) from ``folder``; its
    ``url`` takes the notebook as ``{nb}``."""
    (folder / "notebooks").mkdir()
    for nb in notebooks:
        shutil.copy(ROOT / "notebooks" / nb, folder / "notebooks" / nb)
    (folder / "lab-settings").mkdir()
    (folder / "workspaces").mkdir()
    port, token = free_port(), secrets.token_hex(16)
    return Server([str(BIN / "voila"), "--no-browser", "--Voila.ip=127.0.0.1", f"--port={port}",
                   f"--token={token}", str(folder / "notebooks")],
                  f"http://127.0.0.1:{port}/voila/render/{{nb}}?token={token}",
                  f"http://127.0.0.1:{port}/voila/static/voila.js", folder, folder / "voila.log")


@pytest.fixture(scope="session")
def lab(workdir, playwright_browser):
    port, token = free_port(), secrets.token_hex(16)
    server = Server([str(BIN / "jupyter"), "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
                     f"--port={port}", f"--IdentityProvider.token={token}",
                     f"--ServerApp.root_dir={workdir / 'notebooks'}", "--LabApp.expose_app_in_browser=True",
                     "--LabApp.news_url=None",
                     "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                    f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}",
                    f"http://127.0.0.1:{port}/api/status?token={token}", workdir, workdir / "lab.log")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def voila(workdir, playwright_browser):
    port, token = free_port(), secrets.token_hex(16)
    server = Server([str(BIN / "voila"), "--no-browser", "--Voila.ip=127.0.0.1", f"--port={port}",
                     f"--token={token}", str(workdir / "notebooks" / NOTEBOOK)],
                    f"http://127.0.0.1:{port}/?token={token}",
                    f"http://127.0.0.1:{port}/voila/static/voila.js", workdir, workdir / "voila.log")
    yield server
    server.stop()


class Watched:
    """A page whose console errors and non-local requests are recorded (the latter aborted)."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport={"width": 1366, "height": 768})   # a classroom laptop
        self.external: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def _route(self, route):
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlparse(url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            self.external.append(url)
            route.abort()

    def close(self):
        self.context.close()


@pytest.fixture
def watched(playwright_browser):
    w = Watched(playwright_browser)
    yield w
    w.close()


# -- checks every dashboard test uses -------------------------------------------------
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"   # untracked (.gitignore: build/)

OVERFLOW = """() => {
    const bad = [];
    for (const d of document.querySelectorAll('.offloadkit-dashboard')) {
        const R = d.getBoundingClientRect();
        for (const e of d.querySelectorAll('*')) {
            const r = e.getBoundingClientRect();
            if (r.width === 0 || r.right <= R.right + 1) continue;
            let p = e.parentElement, scrolls = false;
            for (; p && p !== d; p = p.parentElement) {
                const s = getComputedStyle(p);
                if (s.overflowX === 'auto' || s.overflowX === 'scroll') { scrolls = true; break; }
            }
            if (!scrolls) bad.push((e.getAttribute('class') || e.tagName) + ' ' + Math.round(r.right - R.right) + 'px');
        }
    }
    return bad.slice(0, 8);
}"""


def assert_nothing_overflows(page) -> None:
    """No dashboard element sticks out of the dashboard's box unless a scrolling box holds it."""
    bad = page.evaluate(OVERFLOW)
    assert bad == [], f"dashboard elements overflow their box at 1366 px: {bad}"


def drag_mss_across_the_track(page, steps: int = 6) -> list[str]:
    """Drag the MSS slider's handle to ``steps`` + 1 places along its whole track, releasing at each;
    return the error messages shown after any release (the slider's range follows the MTU: none)."""
    track = page.locator(".offloadkit-control-mss .noUi-target").first
    handle = page.locator(".offloadkit-control-mss .noUi-handle").first
    box = track.bounding_box()
    errors = []
    for k in range(steps + 1):
        h = handle.bounding_box()
        page.mouse.move(h["x"] + h["width"] / 2, h["y"] + h["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] * k / steps, h["y"] + h["height"] / 2, steps=4)
        page.mouse.up()
        page.wait_for_timeout(400)
        page.wait_for_function("() => { const b = document.querySelector('.offloadkit-busy');"
                               " return b && b.textContent.trim() === ''; }", timeout=60_000)
        page.wait_for_timeout(1500)     # let vega-embed finish re-embedding the charts before the next drag
        err = page.locator(".offloadkit-message .offloadkit-error")
        if err.count():
            errors.append(err.first.inner_text())
    return errors
