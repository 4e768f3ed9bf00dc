"""Plain-Python reference implementations: readable oracles for the numba kernels and benchmark baselines."""
