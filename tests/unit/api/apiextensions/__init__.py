"""Unit tests of the apiextensions rules: CRD validation and structural schemas (SPEC EX1,
EX3)."""
