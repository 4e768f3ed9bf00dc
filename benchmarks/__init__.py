"""Speed benchmarks: each ``bench_<topic>.py`` prints figures and ratios against the pure-Python reference."""
