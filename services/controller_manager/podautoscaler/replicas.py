"""How many replicas a Resource or ContainerResource metric asks for (Kubernetes'
`ReplicaCalculator`, pkg/controller/podautoscaler/replica_calculator.go).

Pure arithmetic over the pods the scale target selects and the PodMetrics the metrics API
returned, so every rule is testable without a cluster:

- pods being deleted or Failed are ignored; Pending pods, and for cpu pods not Ready or
  still initializing (`group_pods`), count as unready; pods without a sample are missing;
- the usage ratio is usage over target (utilization of the summed requests, or the
  average raw value); within `tolerance` of 1.0 nothing changes;
- with missing or unready pods the ratio is recomputed assuming missing pods use 0 on a
  scale-up and their request (or the target, if above 100 %) on a scale-down, and unready
  pods use 0 on a scale-up; if that flips the direction or lands within tolerance, the
  replica count stays.

Values are milli-units in integers and utilization is truncated as Kubernetes does, so the
same inputs give the same replica counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skiff.api import cpu_millis, get_condition
from skiff.api.types import Obj
from skiff.clock import parse_rfc3339
from skiff.settings import parse_duration

CPU = "cpu"
# What PodMetrics carry when metrics-server leaves `window` out (its scrape period).
DEFAULT_WINDOW = 30.0


class MetricsError(Exception):
    """A replica count could not be computed; `message` is what Kubernetes would report."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class PodMetric:
    """One pod's sample: `value` in milli-units, taken at `timestamp` over `window` s."""

    value: int
    timestamp: float = 0.0
    window: float = DEFAULT_WINDOW


PodMetricsInfo = dict[str, PodMetric]


def milli_value(quantity: Any) -> int:
    """Kubernetes' `Quantity.MilliValue()`: rounded up to a whole milli-unit."""
    return cpu_millis(quantity)


def _timestamp(text: Any) -> float:
    try:
        return parse_rfc3339(str(text))
    except ValueError:
        return 0.0


def _window(text: Any) -> float:
    if text in (None, ""):
        return DEFAULT_WINDOW
    try:
        return parse_duration(text)
    except ValueError:
        return DEFAULT_WINDOW


def resource_metrics(items: Sequence[Obj], resource: str,
                     container: str = "") -> tuple[PodMetricsInfo, float]:
    """The per-pod samples of `resource` from metrics.k8s.io PodMetrics and the first one's
    timestamp (`GetResourceMetric`). A pod without a usage of some container is left out
    (it becomes a missing pod); for a ContainerResource metric, a pod whose metrics lack
    the container is an error."""
    if not items:
        raise MetricsError("no metrics returned from resource metrics API")
    info: PodMetricsInfo = {}
    for item in items:
        meta = item.get("metadata") or {}
        pod = str(meta.get("name", ""))
        stamp, window = _timestamp(item.get("timestamp")), _window(item.get("window"))
        containers = item.get("containers") or []
        if container:
            match = next((c for c in containers if c.get("name") == container), None)
            if match is None:
                raise MetricsError(
                    "failed to get container metrics: container "
                    f"{container} not present in metrics for pod "
                    f"{meta.get('namespace', '')}/{pod}")
            usage = (match.get("usage") or {}).get(resource)
            if usage is not None:
                info[pod] = PodMetric(milli_value(usage), stamp, window)
            continue
        total, complete = 0, bool(containers)
        for c in containers:
            usage = (c.get("usage") or {}).get(resource)
            if usage is None:
                complete = False
                break
            total += milli_value(usage)
        if complete:
            info[pod] = PodMetric(total, stamp, window)
    return info, _timestamp(items[0].get("timestamp"))


@dataclass(frozen=True)
class PodGroups:
    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(pods: Sequence[Obj], metrics: Mapping[str, PodMetric], resource: str, *,
               now: float, cpu_initialization_period: float,
               initial_readiness_delay: float) -> PodGroups:
    """Kubernetes' `groupPods`: which pods count, which wait, which lack a sample.

    For cpu a pod is unready when it has no Ready condition or start time; while within
    `cpu_initialization_period` of starting, when it is not Ready or its sample does not
    cover a full window since it became Ready; after that, only when it is not Ready and
    never was (its Ready condition last changed within `initial_readiness_delay` of start).
    """
    ready, unready, missing, ignored = 0, set(), set(), set()
    for pod in pods:
        name = str(pod["metadata"]["name"])
        status = pod.get("status") or {}
        phase = status.get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase == "Failed":
            ignored.add(name)
            continue
        if phase == "Pending":
            unready.add(name)
            continue
        metric = metrics.get(name)
        if metric is None:
            missing.add(name)
            continue
        if resource == CPU and _cpu_sample_unready(pod, metric, now=now,
                                                   init_period=cpu_initialization_period,
                                                   readiness_delay=initial_readiness_delay):
            unready.add(name)
            continue
        ready += 1
    return PodGroups(ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def _cpu_sample_unready(pod: Obj, metric: PodMetric, *, now: float, init_period: float,
                        readiness_delay: float) -> bool:
    condition = get_condition(pod, "Ready")
    start_text = (pod.get("status") or {}).get("startTime")
    if condition is None or not start_text:
        return True
    start = _timestamp(start_text)
    transition = _timestamp(condition.get("lastTransitionTime") or "")  # unset: long ago
    not_ready = condition.get("status") == "False"
    if start + init_period > now:
        return not_ready or metric.timestamp < transition + metric.window
    return not_ready and start + readiness_delay > transition


def pod_requests(pods: Sequence[Obj], resource: str, container: str = "") -> dict[str, int]:
    """Each pod's request of `resource` in milli-units, summed over its containers and
    restartable (sidecar) init containers, or only `container`'s; a container without
    the request is an error."""
    requests: dict[str, int] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        name = str(pod["metadata"]["name"])
        containers = list(spec.get("containers") or [])
        containers += [c for c in spec.get("initContainers") or []
                       if c.get("restartPolicy") == "Always"]
        total = 0
        for c in containers:
            if container and c.get("name") != container:
                continue
            request = ((c.get("resources") or {}).get("requests") or {}).get(resource)
            if request is None:
                raise MetricsError(f"missing request for {resource} in container "
                                   f"{c.get('name')} of Pod {name}")
            total += milli_value(request)
        requests[name] = total
    return requests


def resource_utilization_ratio(metrics: Mapping[str, PodMetric], requests: Mapping[str, int],
                               target_utilization: int) -> tuple[float, int, int]:
    """(usage ratio, utilization in % of the requests, average raw milli-value) over the
    pods with both a sample and a request (`GetResourceUtilizationRatio`)."""
    metrics_total = requests_total = entries = 0
    for pod, metric in metrics.items():
        request = requests.get(pod)
        if request is None:
            continue
        metrics_total += metric.value
        requests_total += request
        entries += 1
    if requests_total == 0:
        raise MetricsError("no metrics returned matched known pods")
    utilization = metrics_total * 100 // requests_total
    return utilization / target_utilization, utilization, metrics_total // entries


def metric_usage_ratio(metrics: Mapping[str, PodMetric], target_usage: int) -> tuple[float, int]:
    """(usage ratio, average milli-value) of plain per-pod values (`GetMetricUsageRatio`)."""
    usage = sum(m.value for m in metrics.values()) // len(metrics)
    return usage / target_usage, usage


def _assume_usage(metrics: PodMetricsInfo, groups: PodGroups, ratio: float,
                  at_rest: Callable[[str], int]) -> None:
    """Kubernetes' assumption for pods without a usable sample before the ratio is taken
    again: a pod without metrics used nothing if the others ask to scale up and `at_rest`
    (its request's share of the target, or the target) if they ask to scale down; an
    unready pod used nothing when the others ask to scale up."""
    if groups.missing and ratio != 1.0:
        for pod in groups.missing:
            metrics[pod] = PodMetric(at_rest(pod) if ratio < 1.0 else 0)
    if groups.unready and ratio > 1.0:
        for pod in groups.unready:
            metrics[pod] = PodMetric(0)

@dataclass(frozen=True)
class ReplicaCalculator:
    """Kubernetes' ReplicaCalculator for resource metrics, with the controller's flags."""

    tolerance: float = 0.1
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0

    def _within(self, ratio: float) -> bool:
        return abs(1.0 - ratio) <= self.tolerance

    def _groups(self, pods: Sequence[Obj], metrics: PodMetricsInfo, resource: str,
                now: float) -> PodGroups:
        if not pods:
            raise MetricsError("no pods returned by selector while calculating replica count")
        groups = group_pods(pods, metrics, resource, now=now,
                            cpu_initialization_period=self.cpu_initialization_period,
                            initial_readiness_delay=self.initial_readiness_delay)
        for pod in groups.ignored | groups.unready:
            metrics.pop(pod, None)
        if not metrics:
            raise MetricsError("did not receive metrics for targeted pods (pods might be "
                               "unready)")
        return groups

    def utilization_replicas(self, *, current_replicas: int, target_utilization: int,
                             resource: str, pods: Sequence[Obj], metrics: PodMetricsInfo,
                             now: float, container: str = "") -> tuple[int, int, int]:
        """(replicas, utilization %, average raw milli-value) for an averageUtilization
        target (`GetResourceReplicas`). `metrics` is consumed."""
        metrics = dict(metrics)
        groups = self._groups(pods, metrics, resource, now)
        requests = pod_requests(pods, resource, container)
        ratio, utilization, raw = resource_utilization_ratio(metrics, requests,
                                                             target_utilization)
        scale_up_with_unready = bool(groups.unready) and ratio > 1.0
        if not scale_up_with_unready and not groups.missing:
            if self._within(ratio):
                return current_replicas, utilization, raw
            return math.ceil(ratio * groups.ready_count), utilization, raw
        fallback = max(100, target_utilization)
        _assume_usage(metrics, groups, ratio,
                      lambda pod: requests.get(pod, 0) * fallback // 100)
        new_ratio, _, _ = resource_utilization_ratio(metrics, requests, target_utilization)
        replicas = self._rebalanced(current_replicas, ratio, new_ratio, len(metrics))
        return replicas, utilization, raw

    def average_value_replicas(self, *, current_replicas: int, target_usage: int,
                               resource: str, pods: Sequence[Obj], metrics: PodMetricsInfo,
                               now: float) -> tuple[int, int]:
        """(replicas, average milli-value) for an averageValue target
        (`GetRawResourceReplicas` → `calcPlainMetricReplicas`)."""
        metrics = dict(metrics)
        groups = self._groups(pods, metrics, resource, now)
        ratio, usage = metric_usage_ratio(metrics, target_usage)
        scale_up_with_unready = bool(groups.unready) and ratio > 1.0
        if not scale_up_with_unready and not groups.missing:
            if self._within(ratio):
                return current_replicas, usage
            return math.ceil(ratio * groups.ready_count), usage
        _assume_usage(metrics, groups, ratio, lambda _pod: target_usage)
        new_ratio, _ = metric_usage_ratio(metrics, target_usage)
        return self._rebalanced(current_replicas, ratio, new_ratio, len(metrics)), usage

    def _rebalanced(self, current: int, ratio: float, new_ratio: float, counted: int) -> int:
        """The count after filling in missing/unready pods, unless that is within tolerance
        or points the other way than the first estimate did."""
        if (self._within(new_ratio) or (ratio < 1.0 < new_ratio)
                or (ratio > 1.0 > new_ratio)):
            return current
        replicas = math.ceil(new_ratio * counted)
        if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
            return current
        return replicas
