"""Fencing (SPEC FN1, FN3): fence partitioned nodes through an agent, then free their pods."""

from skiff.controller_manager.fencing.controller import FENCE_FINALIZER, FencingController
from skiff.controller_manager.fencing.cordon import TAINT_FENCED, cordoned, uncordoned
from skiff.controller_manager.fencing.policy import FencingPolicy, Verdict, decide

__all__ = ["FENCE_FINALIZER", "TAINT_FENCED", "FencingController", "FencingPolicy", "Verdict",
           "cordoned", "decide", "uncordoned"]
