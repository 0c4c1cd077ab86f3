"""StatefulSet (SPEC PS4): ordered, stable identities with at most one pod each."""

from skiff.controller_manager.statefulset.controller import StatefulSetController, stateful_pod
from skiff.controller_manager.statefulset.plan import Action, Plan, Verb, plan

__all__ = ["Action", "Plan", "StatefulSetController", "Verb", "plan", "stateful_pod"]
