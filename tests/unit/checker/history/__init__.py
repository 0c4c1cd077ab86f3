"""Unit tests of the history checker (`skiff check history`) with synthetic histories."""
