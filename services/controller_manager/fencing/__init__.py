"""Fencing (SPEC FN1, FN3): fence partitioned nodes through an agent, then free their pods."""

from skiff.api.wellknown import FENCE_FINALIZER, TAINT_FENCED
from skiff.controller_manager.fencing.controller import FencingController
from skiff.controller_manager.fencing.cordon import cordoned, uncordoned
from skiff.controller_manager.fencing.policy import FencingPolicy, Verdict, decide

__all__ = ["FENCE_FINALIZER", "TAINT_FENCED", "FencingController", "FencingPolicy", "Verdict",
           "cordoned", "decide", "uncordoned"]
