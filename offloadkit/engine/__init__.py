"""numba kernels over columnar arrays: segmentation, GRO, checksums, paths, TCP, CPU."""
