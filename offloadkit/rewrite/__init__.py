"""A capture's bytes through one stage: what ``offloadkit segment`` and ``gro`` write."""
