"""Skiff's scheduler (issue #5; SPEC TS1–TS5, PP3–PP5, LC9).

Watches pending pods, picks a node for each through a Kubernetes-shaped framework of
plugins (filter, score, preemption) over an incremental cache, and binds them through
`pods/binding`. `main()` is the process entry point; `Scheduler` is the service.
"""

from skiff.scheduler.algorithm import Algorithm, ScheduleResult, num_feasible_nodes_to_find
from skiff.scheduler.cache import Cache, NodeInfo
from skiff.scheduler.config import SchedulerConfiguration, load_config, parse_config
from skiff.scheduler.podinfo import NodeFacts, PodInfo
from skiff.scheduler.queue import SchedulingQueue
from skiff.scheduler.settings import SchedulerSettings, parse_settings

__all__ = [
    "Algorithm", "Cache", "NodeFacts", "NodeInfo", "PodInfo", "ScheduleResult",
    "SchedulerConfiguration", "SchedulerSettings", "SchedulingQueue", "load_config",
    "num_feasible_nodes_to_find", "parse_config", "parse_settings",
]
