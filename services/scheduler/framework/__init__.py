"""The scheduling framework: extension-point Protocols, cycle state, the plugin registry
and the per-profile runtime that runs plugins in order (DESIGN "Seams: Scheduler")."""

from skiff.scheduler.framework.interface import (
    ALL_EVENTS,
    MAX_NODE_SCORE,
    SKIP,
    SUCCESS,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    FilterPlugin,
    FitError,
    NodeScore,
    PostFilterPlugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHintPlugin,
    RawScoreNormalizer,
    ScoreNormalizer,
    ScorePlugin,
    Status,
    error,
    fit_error_message,
    unresolvable,
    unschedulable,
)
from skiff.scheduler.framework.runtime import Framework, PodNominator

__all__ = [
    "ALL_EVENTS", "MAX_NODE_SCORE", "SKIP", "SUCCESS", "ClusterEvent", "Code", "CycleState",
    "Diagnosis", "FilterPlugin", "FitError", "Framework", "NodeScore", "PodNominator",
    "PostFilterPlugin", "PostFilterResult", "PreFilterExtensions", "PreFilterPlugin",
    "PreScorePlugin", "QueueingHintPlugin", "RawScoreNormalizer", "ScoreNormalizer",
    "ScorePlugin", "Status", "error",
    "fit_error_message", "unresolvable", "unschedulable",
]
