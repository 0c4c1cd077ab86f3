"""Unit tests of the admission plugins (the webhook plugins of SPEC EX6 among them)."""
