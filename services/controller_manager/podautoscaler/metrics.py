"""Each `spec.metrics` entry → a replica proposal or a failure, and the proposals → one count
(Kubernetes' `computeReplicasForMetric` / `computeReplicasForMetrics`, horizontal.go).

Resource and ContainerResource metrics are computed from metrics.k8s.io PodMetrics with the
`ReplicaCalculator`. Pods, Object and External metrics need the custom and external metrics
APIs, which Skiff does not serve: they fail as they do in a Kubernetes cluster without those
APIs, so they never drive a scale. The largest proposal wins; if every metric failed, or
some failed and the others would scale down, there is no count and the first failure sets
ScalingActive.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from skiff.api import ApiError
from skiff.api.quantity import canonical
from skiff.api.types import Obj
from skiff.controller_manager.podautoscaler.replicas import (
    MetricsError,
    ReplicaCalculator,
    milli_value,
    resource_metrics,
)

FetchPodMetrics = Callable[[], Awaitable[list[Obj]]]

DEFAULT_METRIC: Obj = {"type": "Resource", "resource": {
    "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
NO_CUSTOM_METRICS_API = ("unable to fetch metrics from custom metrics API: no custom metrics "
                         "API (custom.metrics.k8s.io) registered")
NO_EXTERNAL_METRICS_API = ("unable to fetch metrics from external metrics API: no external "
                           "metrics API (external.metrics.k8s.io) registered")


@dataclass(frozen=True)
class Proposal:
    """What one metric asks for: `metric_name` is how the rescale reason names it."""

    replicas: int
    metric_name: str
    status: Obj


@dataclass(frozen=True)
class Failure:
    """A metric that gave no count: `reason` is the event's and ScalingActive's reason,
    `detail` the event's message, `error` the message that wraps it."""

    reason: str
    detail: str
    error: str

    @property
    def condition_message(self) -> str:
        return f"the HPA was unable to compute the replica count: {self.detail}"


@dataclass(frozen=True)
class Computed:
    """The combined answer: `replicas` is None when no count may be used."""

    replicas: int | None
    metric_name: str
    statuses: list[Obj]
    failure: Failure | None
    error: str


class PodMetricsCache:
    """One metrics.k8s.io request per sync, shared by every resource metric."""

    def __init__(self, fetch: FetchPodMetrics) -> None:
        self._fetch = fetch
        self._items: list[Obj] | None = None
        self._error: ApiError | None = None

    async def items(self) -> list[Obj]:
        if self._error is not None:
            raise self._error
        if self._items is None:
            try:
                self._items = await self._fetch()
            except ApiError as err:
                self._error = err
                raise
        return self._items


@dataclass(frozen=True)
class MetricContext:
    """What every metric of one sync is computed against."""

    namespace: str
    spec_replicas: int
    pods: Sequence[Obj]
    pod_metrics: PodMetricsCache
    calculator: ReplicaCalculator
    now: float


async def evaluate(spec: Obj, ctx: MetricContext) -> Proposal | Failure:
    kind = spec.get("type")
    if kind == "Resource":
        source = spec.get("resource") or {}
        return await _resource(source, ctx, container="")
    if kind == "ContainerResource":
        source = spec.get("containerResource") or {}
        return await _resource(source, ctx, container=str(source.get("container") or ""))
    if kind == "Pods":
        name = str(((spec.get("pods") or {}).get("metric") or {}).get("name", ""))
        detail = f"unable to get metric {name}: {NO_CUSTOM_METRICS_API}"
        return Failure("FailedGetPodsMetric", detail, f"failed to get pods metric value: {detail}")
    if kind == "Object":
        source = spec.get("object") or {}
        name = str((source.get("metric") or {}).get("name", ""))
        ref = source.get("describedObject") or {}
        # Kubernetes' own (oddly ordered) wording of this error.
        detail = (f"unable to get metric {name}: {ref.get('kind', '')} on {ctx.namespace} "
                  f"{ref.get('name', '')}/{NO_CUSTOM_METRICS_API}")
        return Failure("FailedGetObjectMetric", detail,
                       f"failed to get object metric value: {detail}")
    if kind == "External":
        name = str(((spec.get("external") or {}).get("metric") or {}).get("name", ""))
        detail = f"unable to get external metric {ctx.namespace}/{name}: {NO_EXTERNAL_METRICS_API}"
        return Failure("FailedGetExternalMetric", detail,
                       f"failed to get {name} external metric value: {detail}")
    detail = f'unknown metric source type "{kind or ""}"'
    return Failure("InvalidMetricSourceType", detail, detail)


async def _resource(source: Obj, ctx: MetricContext, *, container: str) -> Proposal | Failure:
    resource = str(source.get("name") or "")
    target = source.get("target") or {}
    if container:
        reason, wrap = ("FailedGetContainerResourceMetric",
                        f"failed to get {container} container metric value")
        kind, status_key = "ContainerResource", "containerResource"
    else:
        reason = "FailedGetResourceMetric"
        wrap = f"failed to get {resource} resource metric value"
        kind, status_key = "Resource", "resource"
    try:
        replicas, name, current = await _resource_replicas(resource, target, ctx, container)
    except MetricsError as err:
        return Failure(reason, err.message, f"{wrap}: {err.message}")
    status: Obj = {"name": resource, "current": current}
    if container:
        status["container"] = container
    return Proposal(replicas, name, {"type": kind, status_key: status})


async def _resource_replicas(resource: str, target: Obj, ctx: MetricContext,
                             container: str) -> tuple[int, str, Obj]:
    """(replicas, metric name, MetricValueStatus) — raises MetricsError with the message
    Kubernetes reports (`computeStatusForResourceMetricGeneric`)."""
    average_value = target.get("averageValue")
    utilization = target.get("averageUtilization")
    if average_value is None and utilization is None:
        raise MetricsError("invalid resource metric source: neither an average utilization "
                           "target nor an average value (usage) target was set")
    what = "usage" if average_value is not None else "utilization"
    fetch_error = ""
    try:
        metrics, _ = resource_metrics(await ctx.pod_metrics.items(), resource, container)
    except ApiError as err:
        fetch_error = f"unable to fetch metrics from resource metrics API: {err.message}"
    except MetricsError as err:
        fetch_error = err.message
    if fetch_error:
        raise MetricsError(f"failed to get {resource} {what}: unable to get metrics for "
                           f"resource {resource}: {fetch_error}")
    try:
        if average_value is not None:
            target_usage = milli_value(average_value)
            if target_usage <= 0:
                raise MetricsError("averageValue must be greater than 0")
            replicas, usage = ctx.calculator.average_value_replicas(
                current_replicas=ctx.spec_replicas, target_usage=target_usage,
                resource=resource, pods=ctx.pods, metrics=metrics, now=ctx.now)
            return replicas, f"{resource} resource", {"averageValue": _milli_quantity(usage)}
        target_utilization = int(utilization or 0)
        if target_utilization <= 0:
            raise MetricsError("averageUtilization must be greater than 0")
        replicas, percent, raw = ctx.calculator.utilization_replicas(
            current_replicas=ctx.spec_replicas, target_utilization=target_utilization,
            resource=resource, pods=ctx.pods, metrics=metrics, now=ctx.now,
            container=container)
    except MetricsError as err:
        raise MetricsError(f"failed to get {resource} {what}: {err.message}") from None
    name = (f"{resource} container resource utilization (percentage of request)" if container
            else f"{resource} resource utilization (percentage of request)")
    return replicas, name, {"averageUtilization": percent, "averageValue": _milli_quantity(raw)}


def _milli_quantity(milli: int) -> str:
    """`resource.NewMilliQuantity(v, DecimalSI).String()`."""
    return canonical(Fraction(milli, 1000), binary=False)


def combine(results: Sequence[Proposal | Failure], spec_replicas: int) -> Computed:
    """The largest proposal, unless every metric failed or some failed and the rest would
    scale down (then None, and the first failure explains it)."""
    replicas, metric_name = 0, ""
    statuses: list[Obj] = []
    failures = [r for r in results if isinstance(r, Failure)]
    for result in results:
        if isinstance(result, Failure):
            continue
        statuses.append(result.status)
        if replicas == 0 or result.replicas > replicas:
            replicas, metric_name = result.replicas, result.metric_name
    first = failures[0] if failures else None
    error = (f"invalid metrics ({len(failures)} invalid out of {len(results)}), first error "
             f"is: {first.error}") if first else ""
    if first is not None and (len(failures) >= len(results) or replicas < spec_replicas):
        return Computed(None, "", statuses, first, error)
    return Computed(replicas, metric_name, statuses, first, error)
