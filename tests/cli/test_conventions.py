"""CLI conventions every verb shares: one-line errors (exit 2), bugs as one line (exit 3, --debug
for the traceback), --version, truthful --help, a quiet closed pipe, seed numbers as report ids,
bool flags, the warm-up verb and the first-compile note."""
from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import offloadkit
from offloadkit import cli, numba_cache
from offloadkit.commands import options

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL_FLAGS = {"--set-mss"}   # other tools' flags quoted in help texts (iptables TCPMSS --set-mss)


def _parsers():
    """{verb: its configured sub-parser (sub-sub-parsers of lab included as 'lab run' ...)}."""
    top = cli.build_parser(every_verb=True)
    out = {}

    def walk(prefix, parser):
        for action in parser._actions:
            if action.__class__.__name__ == "_SubParsersAction":
                for name, p in action.choices.items():
                    out[f"{prefix} {name}".strip()] = p
                    walk(f"{prefix} {name}".strip(), p)
    walk("", top)
    return top, out


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"offloadkit {offloadkit.__version__}"


def test_every_help_names_only_options_that_exist(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")   # argparse wraps lines at hyphens: --no-\nrx-csum
    top, parsers = _parsers()
    assert {v for v in cli.VERBS if cli._exists(v)} <= set(parsers)
    for verb, p in parsers.items():
        text = p.format_help()
        own = {s for a in p._actions for s in a.option_strings}
        named = {s for v, q in parsers.items() if f"offloadkit {v} " in text or f"offloadkit {v}`" in text
                 for a in q._actions for s in a.option_strings}
        for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)):
            assert flag in own | named | EXTERNAL_FLAGS | {"--help", "--debug"}, f"`offloadkit {verb} --help` mentions {flag}"


def test_help_and_version_import_no_verb_and_no_numpy():
    code = ("import sys, contextlib, io\nfrom offloadkit.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help']); main(['--version'])\n"
            "print(sorted(m for m in ('numpy', 'numba', 'offloadkit.commands.simulate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "[]", out



def test_every_verbs_help_imports_no_numba_numpy_or_pandas():
    """``offloadkit VERB --help`` configures the verb without the engine: numba only for verbs that run kernels."""
    from offloadkit.cli import VERBS
    code = ("import sys, contextlib, io\nfrom offloadkit.cli import main\nverb = sys.argv[1]\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main([verb, '--help'])\n"
            "print(sorted(m for m in ('numpy', 'numba', 'pandas', 'dask') if m in sys.modules))")
    for verb in VERBS:
        out = subprocess.run([sys.executable, "-c", code, verb], capture_output=True, text=True, cwd=ROOT,
                             timeout=120)
        assert out.returncode == 0 and out.stdout.strip() == "[]", (verb, out)

@pytest.mark.parametrize("argv, option", [
    (["trace", "rtl8139", "-n", "1e400"], "-n"), (["trace", "rtl8139", "-n", "-3"], "-n"),
    (["trace", "nope"], "ID"), (["doctor", "x.pcap", "--mtu", "nan"], "--mtu"),
    (["warmup", "--nope"], "--nope"),
])
def test_bad_arguments_are_one_line_naming_the_option(argv, option, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and option in err and err.startswith(f"offloadkit {argv[0]}"), err


def test_seed_numbers_are_report_ids(capsys):
    assert cli.main(["trace", "000", "-n", "4"]) == 0
    by_number = capsys.readouterr().out
    assert cli.main(["trace", "rtl8139", "-n", "4"]) == 0
    assert by_number == capsys.readouterr().out and by_number.count("\n") == 4
    args = cli.build_parser("reproduce").parse_args(["reproduce", "--report", "4", "--report", "001"])
    assert args.report == ["vlan-nat", "mpls"]


def test_a_bug_is_one_line_exit_3_and_debug_shows_the_traceback(monkeypatch, capsys):
    from offloadkit.commands import trace

    def broken(args):
        raise RuntimeError("kaboom")
    monkeypatch.setattr(trace, "run", broken)
    assert cli.main(["trace", "rtl8139"]) == 3
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "internal error RuntimeError: kaboom" in err and "offloadkit trace rtl8139" in err
    assert cli.main(["--debug", "trace", "rtl8139"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_a_closed_pipe_exits_quietly():
    p = subprocess.Popen([sys.executable, "-m", "offloadkit", "trace", "rtl8139", "-n", "0"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 0
    assert "Traceback" not in err and "Broken pipe" not in err and "BrokenPipe" not in err, err


def test_bool_flags_take_both_spellings():
    import argparse
    p = argparse.ArgumentParser()
    options.add_bool_flag(p, "tso", True, "TSO")
    options.add_bool_flag(p, "gro", None, "GRO", onoff=True)
    assert p.parse_args([]).tso is True and p.parse_args([]).gro is None
    assert p.parse_args(["--no-tso"]).tso is False and p.parse_args(["--tso"]).tso is True
    assert p.parse_args(["--gro", "off"]).gro is False and p.parse_args(["--no-gro"]).gro is False
    assert p.parse_args(["--gro", "on"]).gro is True and p.parse_args(["--gro"]).gro is True
    assert "--tso or --no-tso (default on)" in p.format_help()


def test_option_types_name_the_unit():
    assert options.rate()("12.5MB/s") == 10**8 and options.duration(maximum=10**12)("1ms") == 10**6
    assert options.size(minimum=1)("64KiB") == 65536 and options.count(1)("64") == 64
    for t, bad in ((options.rate(), "0bit"), (options.duration(maximum=10**12), "1e20s"),
                   (options.count(1, 2**31 - 1), "1e24"), (options.fraction(), "nan")):
        with pytest.raises(Exception, match="out of range|not a finite|write"):
            t(bad)


FAKE_KERNELS = '''
from numba import njit

@njit(cache=True)
def twice(x):
    return 2 * x

def warmup():
    assert twice(21) == 42
'''


def test_warmup_verb_builds_a_marked_shared_cache(tmp_path):
    (tmp_path / "okfake_kernels.py").write_text(textwrap.dedent(FAKE_KERNELS))
    cache = tmp_path / "shared"
    code = ("import sys, offloadkit.warmup as w; w.MODULES = ['okfake_kernels']\n"
            "from offloadkit.cli import main\n"
            f"sys.exit(main(['warmup', '--cache-dir', {str(cache)!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": f"{ROOT}:{tmp_path}", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                              "OFFLOADKIT_AOT": "0"})       # no AOT build of the real kernels here
    assert out.returncode == 0, out.stderr
    assert "[1/1] okfake_kernels" in out.stderr and "shared cache ready" in out.stderr
    assert (cache / numba_cache.STAMP).is_file()
    assert list(cache.rglob("*.nbi")), "numba wrote nothing into --cache-dir"


def test_a_shared_cache_is_found_and_a_read_only_one_copied(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    (shared / "engine_x").mkdir(parents=True)
    (shared / "engine_x" / "k.nbi").write_text("index")
    numba_cache.write_stamp(shared, "v1")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setenv(numba_cache.SHARED_ENV, str(shared))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home" / ".cache").mkdir(parents=True)
    assert numba_cache.choose() == str(shared)                      # writable: used in place
    monkeypatch.setattr(numba_cache, "_writable", lambda p: Path(p) != shared)
    copy = Path(numba_cache.choose())                                # read-only: copied for this user
    assert copy != shared and (copy / "engine_x" / "k.nbi").read_text() == "index"
    numba_cache.write_stamp(shared, "v2")
    (shared / "engine_x" / "k.nbi").write_text("rebuilt")
    assert (Path(numba_cache.choose()) / "engine_x" / "k.nbi").read_text() == "rebuilt"
    monkeypatch.setenv("NUMBA_CACHE_DIR", "/elsewhere")
    assert numba_cache.choose() is None                             # NUMBA_CACHE_DIR always wins


def test_first_compile_says_so_once_and_how_long():
    from numba import njit
    from numba.core import event

    from offloadkit.jit_notes import FIRST_LINE, watch_compiles
    stream = io.StringIO()
    with watch_compiles(stream) as watch:
        f = njit(lambda x: x + 1)          # not cached: compiles here
        assert f(1) == 2 and f(2) == 3
        g = njit(lambda x: x * 3)
        assert g(1) == 3
    assert watch not in event._registered["numba:compile"]
    assert stream.getvalue() == FIRST_LINE + "\n"
    assert watch.compiled == 2 and re.fullmatch(r"offloadkit: compiled 2 kernel\(s\) in \d+\.\d s; .*",
                                                watch.summary())
