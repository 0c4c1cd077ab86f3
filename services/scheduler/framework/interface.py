"""The scheduling framework's vocabulary: statuses, cycle state and one Protocol per
extension point (Kubernetes' `framework.Plugin` family).

A plugin is a small class implementing only the points it needs; the profile runtime
(`framework.runtime`) finds out which by `isinstance` against these Protocols. Every call
gets the per-cycle `CycleState`, into which PreFilter/PreScore write what Filter/Score read.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from skiff.scheduler.cache import NodeInfo
    from skiff.scheduler.podinfo import PodInfo

MAX_NODE_SCORE = 100


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    SKIP = 4


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's verdict; `reasons` are the user-facing strings counted in FitError."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    # Read once per plugin per node in Filter: a slot, not a property.
    ok: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ok", self.code in (Code.SUCCESS, Code.SKIP))

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return Status(self.code, self.reasons, plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(message: str) -> Status:
    return Status(Code.ERROR, (message,))


class StateData(Protocol):
    """What a plugin stores in the cycle state; preemption clones it per candidate node."""

    def clone(self) -> StateData: ...


class CycleState:
    """Per-scheduling-cycle scratch space (Kubernetes' `framework.CycleState`)."""

    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, StateData] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: str, value: StateData) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        """The value or None; plugins cast to their own type."""
        return self._data.get(key)

    def clone(self) -> CycleState:
        copy = CycleState()
        copy._data = {k: v.clone() for k, v in self._data.items()}
        copy.skip_filter = set(self.skip_filter)
        copy.skip_score = set(self.skip_score)
        return copy


@dataclass(slots=True)
class NodeScore:
    name: str
    score: int


# --- cluster events that can make an unschedulable pod schedulable -------------------

class ClusterEvent(enum.StrEnum):
    NODE_ADD = "NodeAdd"
    NODE_UPDATE = "NodeUpdate"
    ASSIGNED_POD_ADD = "AssignedPodAdd"
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
    ASSIGNED_POD_DELETE = "AssignedPodDelete"
    PDB_CHANGE = "PodDisruptionBudgetChange"
    OWNER_CHANGE = "OwnerChange"  # a ReplicaSet/StatefulSet (default spread selectors)
    NAMESPACE_CHANGE = "NamespaceChange"  # namespace labels (pod affinity namespaceSelector)
    PVC_CHANGE = "PersistentVolumeClaimChange"  # a claim created, updated or deleted
    STORAGE_CLASS_CHANGE = "StorageClassChange"  # a class created or updated


ALL_EVENTS = frozenset(ClusterEvent)


# --- extension points ------------------------------------------------------------------

@runtime_checkable
class Plugin(Protocol):
    name: str


@runtime_checkable
class EnqueueExtensions(Protocol):
    """Which cluster events may make a pod this plugin rejected schedulable again."""

    def events_to_register(self) -> frozenset[ClusterEvent]: ...


@runtime_checkable
class QueueingHintPlugin(Protocol):
    """Kubernetes' QueueingHintFn for pod events: given the pod this plugin rejected and
    the assigned pod that changed (`old` None when added, `new` None when deleted), may
    the change make it schedulable? False keeps it waiting (QueueSkip)."""

    name: str

    def is_schedulable_after_pod_change(self, pod: PodInfo, old: PodInfo | None,
                                        new: PodInfo | None) -> bool: ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: str

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Keep PreFilter state right when preemption or nominated pods add/remove a pod."""

    name: str

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo,
                node: NodeInfo) -> None: ...

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                   node: NodeInfo) -> None: ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status: ...


@dataclass(frozen=True)
class PostFilterResult:
    """What PostFilter decided about the pod's nomination (Kubernetes' NominatingInfo in
    ModeOverride): the node to nominate, or "" to clear a stale nomination. No result
    at all (None) leaves the nomination as it is."""

    nominated_node_name: str = ""


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: str

    async def post_filter(self, state: CycleState, pod: PodInfo, statuses: dict[str, Status]
                          ) -> tuple[PostFilterResult | None, Status]: ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: str

    def pre_score(self, state: CycleState, pod: PodInfo,
                  nodes: Sequence[NodeInfo]) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int: ...


@runtime_checkable
class BatchScorePlugin(Protocol):
    """A Score plugin that can also score all the cycle's nodes in one call (same results
    as `score` per node), saving a Python call per node for plugins that run on every
    node of every cycle."""

    name: str

    def score_nodes(self, state: CycleState, pod: PodInfo,
                    nodes: Sequence[NodeInfo]) -> list[int]: ...


@runtime_checkable
class ScoreNormalizer(Protocol):
    name: str

    def normalize_score(self, state: CycleState, pod: PodInfo,
                        scores: list[NodeScore]) -> None: ...


@runtime_checkable
class RawScoreNormalizer(Protocol):
    """A ScoreNormalizer that also normalizes plain score lists (`raw[i]` is node
    `names[i]`'s), returning the normalized list: the same results as `normalize_score`
    without a NodeScore per node and plugin, which was ~10 % of the scheduler's CPU."""

    name: str

    def normalize_raw(self, state: CycleState, pod: PodInfo, names: Sequence[str],
                      raw: list[int]) -> list[int]: ...


@dataclass
class Diagnosis:
    """Why a pod fits nowhere: each node's rejecting status, plus what PostFilter said."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""


NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


def _with_period(message: str) -> str:
    return message if message.endswith(".") else message + "."


class FitError(Exception):
    """No node fits; `str()` is Kubernetes' message ("0/3 nodes are available: ...")."""

    def __init__(self, *, pod: PodInfo, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return fit_error_message(self.num_all_nodes, self.diagnosis)


def reason_histogram(statuses: Sequence[Status]) -> list[str]:
    counts: dict[str, int] = {}
    for status in statuses:
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    return sorted(f"{n} {reason}" for reason, n in counts.items())


def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    message = NO_NODE_AVAILABLE_MSG.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        message += " " + _with_period(diagnosis.pre_filter_msg)
    else:
        reasons = reason_histogram(list(diagnosis.node_to_status.values()))
        if reasons:
            message += " " + _with_period(", ".join(reasons))
    if diagnosis.post_filter_msg:
        message += " " + _with_period(diagnosis.post_filter_msg)
    return message
