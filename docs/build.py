"""Build the offloadkit site: ``python docs/build.py OUT`` writes OUT/html (``make docs``).

Assembles a source folder (this folder's pages, the notebooks with their stored
outputs, a CLI reference generated from ``offloadkit.cli.build_parser`` and the
instructor guide's answer key computed by ``offloadkit.exercises``), then runs
Sphinx with warnings as errors. Nothing in the repository is written.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KEY_MARKER = "<!-- answer key -->"


def cli_reference() -> str:
    """Markdown of ``offloadkit --help`` and every verb's ``--help``, from the argparse parsers."""
    from offloadkit.cli import VERBS, build_parser
    parser = build_parser(every_verb=True)
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    out = ["# Command-line reference", "",
           "Generated from the argparse parsers (`offloadkit.cli.build_parser`) when the site is built.", "",
           "```text", parser.format_help().rstrip(), "```", ""]
    for verb in VERBS:
        if verb in sub.choices:
            out += [f"## offloadkit {verb}", "", "```text", sub.choices[verb].format_help().rstrip(), "```", ""]
    return "\n".join(out)


def answer_key() -> str:
    """A Markdown table: every exercise, its question and the answer the library computes now."""
    from offloadkit import exercises as X
    rows = ["| notebook | id | question | answer | tolerance |", "|---|---|---|---|---|"]
    for nb, eids in X.by_notebook().items():
        for eid in eids:
            e = X.get(eid)
            a = X.answer(eid)
            tol = f"± {e.rel:.0%}" if e.rel else (f"± {e.abs:g}" if e.abs else "exact")
            shown = f"{a:,}" if isinstance(a, int) else f"{a:,.4g}"
            rows.append(f"| {nb} | `{eid}` | {e.question} | {shown} {e.unit} | {tol} |")
    return "\n".join(rows)


def without_widget_state(nb: dict) -> dict:
    """The notebook without its stored widget state: the site has no widget manager (no CDN), and
    each JupyterChart's state holds a megabyte of JavaScript; the dashboards' static copies show instead."""
    nb.get("metadata", {}).pop("widgets", None)
    return nb


def assemble(src: Path, notebooks: Path = ROOT / "notebooks") -> Path:
    """Write the Sphinx source folder ``src`` (the notebooks from ``notebooks``)."""
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(HERE, src, ignore=shutil.ignore_patterns("build.py", "screenshots", "__pycache__", "_build"))
    (src / "notebooks").mkdir()
    for nb in sorted(Path(notebooks).glob("[0-9][0-9]-*.ipynb")):
        (src / "notebooks" / nb.name).write_text(json.dumps(without_widget_state(json.loads(
            nb.read_text(encoding="utf-8")))), encoding="utf-8")
    (src / "cli.md").write_text(cli_reference() + "\n", encoding="utf-8")
    guide = src / "instructor.md"
    text = guide.read_text(encoding="utf-8")
    if KEY_MARKER not in text:
        raise SystemExit(f"{guide.name}: the marker {KEY_MARKER} is missing")
    guide.write_text(text.replace(KEY_MARKER, answer_key()), encoding="utf-8")
    return src


def build(out: Path, quiet: bool = True, notebooks: Path = ROOT / "notebooks") -> Path:
    """Build the site into ``out/html`` (warnings are errors); return that folder."""
    from sphinx.cmd.build import build_main
    out = Path(out).resolve()
    src = assemble(out / "src", notebooks)
    html = out / "html"
    args = ["-W", "--keep-going", "-b", "html", "-d", str(out / "doctrees"), str(src), str(html)]
    if quiet:
        args.insert(0, "-q")
    if build_main(args) != 0:
        raise SystemExit(f"sphinx-build failed (warnings are errors); the sources are in {src}")
    return html


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(ROOT / "build" / "docs"), help="output folder (default build/docs)")
    ap.add_argument("--notebooks", default=str(ROOT / "notebooks"),
                    help="folder of the notebooks to render (default: the repository's, as stored)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show Sphinx's progress")
    a = ap.parse_args(argv)
    html = build(Path(a.out), quiet=not a.verbose, notebooks=Path(a.notebooks))
    print(f"site: {html / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
