"""offloadkit.units: the one parser of rates, times, sizes, counts and fractions."""
from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from offloadkit.units import INT64_MAX, parse_count, parse_fraction, parse_rate, parse_size, parse_time


@pytest.mark.parametrize("text, bits", [
    ("100Mbit", 10**8), ("100Mbps", 10**8), ("100mbit", 10**8), ("100M", 10**8), ("9.6Mbit", 9_600_000),
    ("1Gbit", 10**9), ("30gbps", 30 * 10**9), ("2000", 2000), (2000, 2000), ("100Mb/s", 10**8),
    ("1Kibit", 1024), ("1Mibit", 2**20),
    # bytes per second: capital B, converted x8, never read as bits
    ("100MBps", 8 * 10**8), ("100MB/s", 8 * 10**8), ("12.5MB/s", 10**8), ("1MiB/s", 8 * 2**20), ("1000B/s", 8000),
])
def test_rates(text, bits):
    assert parse_rate(text) == bits


@pytest.mark.parametrize("text, ns", [("20ms", 20_000_000), ("10s", 10**10), ("50us", 50_000), ("50µs", 50_000),
                                      ("2", 2 * 10**9), ("0.002", 2_000_000), ("7ns", 7), ("0", 0)])
def test_times(text, ns):
    assert parse_time(text) == ns


@pytest.mark.parametrize("text, n", [("100MB", 10**8), ("64KiB", 65536), ("1.5kB", 1500), ("4M", 4 * 10**6),
                                     ("1GiB", 2**30), ("1500", 1500), ("1e3", 1000), (1000, 1000), ("3 bytes", 3)])
def test_sizes(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("fn, text, words", [
    (parse_rate, "1e400Mbit", "not a finite number"), (parse_rate, "0bit", "out of range"),
    (parse_rate, "-5Mbit", "out of range"), (parse_rate, "nan", "write a number"),
    (parse_rate, "100MB", "bytes per second like 12.5MB/s"), (parse_rate, "fast", "e.g."),
    (parse_time, "1e400s", "not a finite number"), (parse_time, "1e20s", "out of range"),
    (parse_time, "-1ms", "out of range"), (parse_time, "nan", "write a number"), (parse_time, "inf", "e.g."),
    (parse_time, "5min", "s, ms, us, ns"), (parse_time, "soon", "e.g."),
    (parse_size, "1e999", "not a finite number"), (parse_size, "100Mb", "lower-case b means bits"),
    (parse_size, "10 parsecs", "e.g."), (parse_size, "-1", "out of range"),
    (parse_count, "1e24", "out of range"), (parse_count, "1.5", "whole number"), (parse_count, "x", "whole"),
    (parse_fraction, "nan", "write a number"), (parse_fraction, "2", "out of range"),
    (parse_fraction, "1e400", "not a finite"),
])
def test_bad_values_are_one_sentence_saying_what_to_write(fn, text, words):
    kwargs = {"maximum": 2**31 - 1} if fn is parse_count else {}
    with pytest.raises(ValueError, match=words) as e:
        fn(text, **kwargs)
    assert "\n" not in str(e.value) and repr(text) in str(e.value)


def test_bounds_are_the_callers():
    assert parse_time("1s", maximum=10**9) == 10**9
    with pytest.raises(ValueError, match="to 1000000000 ns"):
        parse_time("2s", maximum=10**9)
    assert parse_count("64", minimum=1) == 64 and parse_count("10k") == 10_000
    assert parse_fraction("0.1%") == pytest.approx(0.001) and parse_fraction("0.25") == 0.25
    with pytest.raises(ValueError):
        parse_rate(True)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_float_text_is_an_int64_or_a_value_error(x):
    for fn in (parse_rate, parse_time, parse_size):
        try:
            v = fn(repr(x) if math.isfinite(x) else str(x))
        except ValueError:
            continue
        assert isinstance(v, int) and 0 <= v <= INT64_MAX


@given(st.integers(min_value=1, max_value=10**5), st.sampled_from(["k", "M", "G"]))
def test_bytes_per_second_are_eight_bits_per_byte(n, prefix):
    assert parse_rate(f"{n}{prefix}B/s") == 8 * parse_rate(f"{n}{prefix}bit") == 8 * parse_size(f"{n}{prefix}B")
