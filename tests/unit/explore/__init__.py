"""Unit tests of `skiff explore`'s workload, steps and oracle (SPEC CT2)."""
