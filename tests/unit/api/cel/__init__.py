"""Unit tests of Skiff's CEL: the environment (`skiff.api.cel`) and CRD validation rules."""
