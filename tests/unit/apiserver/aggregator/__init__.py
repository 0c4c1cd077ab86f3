"""Unit tests of the aggregation layer (SPEC EX8)."""
