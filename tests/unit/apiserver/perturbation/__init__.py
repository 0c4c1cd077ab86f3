"""Unit tests of the apiserver's perturbation engine added for issue 35 part 2: the
record (journal) of one identity's requests, the fromWrite stale view, and traces."""
