"""The HorizontalPodAutoscaler controller (kube-controller-manager's
`horizontalpodautoscaling`, pkg/controller/podautoscaler/horizontal.go), autoscaling/v2.

Every `--horizontal-pod-autoscaler-sync-period` (and when an HPA is created or its spec
changes) an HPA is reconciled in named steps: read the scale target (`_get_scale`, through
`skiff.client.scale`: a Deployment, ReplicaSet, StatefulSet or ReplicationController, or a
custom resource with a scale subresource, whose CRD's paths are read from the CRD informer
`CustomKinds` follows — SPEC EX4), decide the
desired count (`_desired_replicas`: the target at zero disables scaling, outside min/max it
is brought back in range, otherwise the metrics' count normalized by `behavior`), write it
to the target (`_rescale`, retrying conflicts while nobody else changed the replicas), and
write `status` (current/desired replicas, lastScaleTime, currentMetrics, conditions) only
when it changed. Conditions, events and their messages are Kubernetes'. Failures are
reported on the HPA and retried at the next sync, not with the workqueue's fast backoff.
"""

from __future__ import annotations

import copy
import logging

from skiff.api import ApiError, LabelSelector, Reason
from skiff.api.types import Obj
from skiff.client import BY_NAMESPACE, object_key
from skiff.client.scale import Scale, ScaleError, get_scale, resolve, update_replicas
from skiff.clock import rfc3339
from skiff.controller_manager.controller import Controller, ControllerContext
from skiff.controller_manager.podautoscaler.behavior import History, behavior_from_spec, normalize
from skiff.controller_manager.podautoscaler.metrics import (
    DEFAULT_METRIC,
    Computed,
    Failure,
    MetricContext,
    PodMetricsCache,
    combine,
    evaluate,
)
from skiff.controller_manager.podautoscaler.replicas import ReplicaCalculator

log = logging.getLogger(__name__)

NORMAL, WARNING = "Normal", "Warning"
ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED = "AbleToScale", "ScalingActive", "ScalingLimited"
RESCALE_ATTEMPTS = 5


def set_condition(hpa: Obj, type_: str, status: str, reason: str, message: str,
                  now: float) -> None:
    """Set one of status.conditions; lastTransitionTime moves only when `status` does."""
    conditions: list[Obj] = hpa["status"].setdefault("conditions", [])
    existing = next((c for c in conditions if c.get("type") == type_), None)
    if existing is None:
        existing = {"type": type_}
        conditions.append(existing)
    if existing.get("status") != status:
        existing["lastTransitionTime"] = rfc3339(now)
    existing.update(status=status, reason=reason, message=message)


class HorizontalController(Controller):
    name = "horizontalpodautoscaling"

    def __init__(self, *, context: ControllerContext) -> None:
        settings = context.settings
        super().__init__(context=context,
                         workers=settings.concurrent_horizontal_pod_autoscaler_syncs)
        self.sync_period = settings.horizontal_pod_autoscaler_sync_period
        self.downscale_stabilization = settings.horizontal_pod_autoscaler_downscale_stabilization
        self.calculator = ReplicaCalculator(
            tolerance=settings.horizontal_pod_autoscaler_tolerance,
            cpu_initialization_period=settings.horizontal_pod_autoscaler_cpu_initialization_period,
            initial_readiness_delay=settings.horizontal_pod_autoscaler_initial_readiness_delay)
        self.hpas = context.informers.resource("horizontalpodautoscalers")
        self.pods = context.informers.pods()
        # The CRDs, for a custom target's scale paths (the informer CustomKinds follows).
        self.crds = context.informers.custom_kinds().informer
        self.recorder = context.recorder("horizontal-pod-autoscaler")
        # Per HPA key: recommendations and scale events (stabilization, rate policies), and
        # the last selector of its target (to find pods that two HPAs would scale).
        self.histories: dict[str, History] = {}
        self.selectors: dict[str, LabelSelector] = {}
        self.hpas.add_handler(on_add=lambda hpa: self.enqueue(object_key(hpa)),
                              on_update=self._on_update,
                              on_delete=lambda hpa: self.enqueue(object_key(hpa)))

    def _on_update(self, old: Obj, new: Obj) -> None:
        # Our own status writes come back as updates: only a spec change is worth a sync
        # before the next period.
        if old.get("spec") != new.get("spec"):
            self.enqueue(object_key(new))

    async def reconcile(self, key: str) -> float | None:
        cached = self.hpas.store.get(key)
        if cached is None:
            self.histories.pop(key, None)
            self.selectors.pop(key, None)
            return None
        hpa = copy.deepcopy(cached)
        hpa["status"] = copy.deepcopy(cached.get("status") or {})
        await self._reconcile_autoscaler(hpa, key)
        await self._write_status(cached.get("status") or {}, hpa)
        return self.sync_period

    # -- the steps ------------------------------------------------------------------------

    async def _reconcile_autoscaler(self, hpa: Obj, key: str) -> None:
        now = self.clock.now()
        scale = await self._get_scale(hpa, now)
        if scale is None:
            return
        set_condition(hpa, ABLE_TO_SCALE, "True", "SucceededGetScale",
                      "the HPA controller was able to get the target's current scale", now)
        current = scale.spec_replicas
        history = self.histories.setdefault(key, History())
        history.record_initial(current, now)
        decided = await self._desired_replicas(hpa, key, scale, history, now)
        if decided is None:
            return
        desired, reason, statuses = decided
        rescale = desired != current
        if rescale:
            if not await self._rescale(hpa, scale, desired, reason, now):
                self._set_status(hpa, current, hpa["status"].get("desiredReplicas", 0),
                                 statuses, rescaled=False, now=now)
                return
            behavior = behavior_from_spec((hpa.get("spec") or {}).get("behavior"),
                                          downscale_stabilization=self.downscale_stabilization)
            history.store_scale_event(behavior, current, desired, now)
        else:
            desired = current
        self._set_status(hpa, current, desired, statuses, rescaled=rescale, now=now)

    async def _get_scale(self, hpa: Obj, now: float) -> Scale | None:
        """The target's replicas and selector, or None after reporting FailedGetScale."""
        ref = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
        namespace = str(hpa["metadata"].get("namespace") or "")
        try:
            target = resolve(api_version=str(ref.get("apiVersion") or ""),
                             kind=str(ref.get("kind") or ""), crd_of=self.crds.store.get)
            return await get_scale(self.client, target, name=str(ref.get("name") or ""),
                                   namespace=namespace)
        except (ScaleError, ApiError) as err:
            await self._failed_get_scale(hpa, err.message, now)
            return None

    async def _failed_get_scale(self, hpa: Obj, message: str, now: float) -> None:
        await self.recorder.event(hpa, WARNING, "FailedGetScale", message)
        set_condition(hpa, ABLE_TO_SCALE, "False", "FailedGetScale",
                      f"the HPA controller was unable to get the target's current scale: "
                      f"{message}", now)
        log.info("unable to get the scale target",
                 extra={"hpa": object_key(hpa), "error": message})

    @staticmethod
    def _min_replicas(hpa: Obj) -> int:
        value = (hpa.get("spec") or {}).get("minReplicas")
        return 1 if value is None else int(value)

    async def _desired_replicas(self, hpa: Obj, key: str, scale: Scale, history: History,
                                now: float) -> tuple[int, str, list[Obj] | None] | None:
        """(desired, rescale reason, currentMetrics) — None when the metrics gave no count
        (the HPA's status then keeps its desiredReplicas)."""
        spec = hpa.get("spec") or {}
        current = scale.spec_replicas
        min_replicas, max_replicas = self._min_replicas(hpa), int(spec.get("maxReplicas") or 0)
        if current == 0 and min_replicas != 0:
            set_condition(hpa, SCALING_ACTIVE, "False", "ScalingDisabled",
                          "scaling is disabled since the replica count of the target is zero",
                          now)
            return 0, "", None
        if current > max_replicas:
            return max_replicas, "Current number of replicas above Spec.MaxReplicas", None
        if current < min_replicas:
            return min_replicas, "Current number of replicas below Spec.MinReplicas", None
        computed = await self._compute_replicas_for_metrics(hpa, key, scale, now)
        if computed.replicas is None:
            self._set_status(hpa, current, hpa["status"].get("desiredReplicas", 0),
                             computed.statuses, rescaled=False, now=now)
            if computed.error:
                await self.recorder.event(hpa, WARNING, "FailedComputeMetricsReplicas",
                                          computed.error)
            log.info("failed to compute the desired number of replicas",
                     extra={"hpa": key, "error": computed.error})
            return None
        desired = max(computed.replicas, 0)
        reason = ""
        if desired > current:
            reason = f"{computed.metric_name} above target"
        elif desired < current:
            reason = "All metrics below target"
        behavior = behavior_from_spec(spec.get("behavior"),
                                      downscale_stabilization=self.downscale_stabilization)
        normalized = normalize(history, behavior, current=current, desired=desired,
                               min_replicas=min_replicas, max_replicas=max_replicas, now=now,
                               downscale_stabilization=self.downscale_stabilization)
        set_condition(hpa, ABLE_TO_SCALE, *normalized.able_to_scale, now)
        set_condition(hpa, SCALING_LIMITED, *normalized.scaling_limited, now)
        return normalized.replicas, reason, computed.statuses

    async def _compute_replicas_for_metrics(self, hpa: Obj, key: str, scale: Scale,
                                            now: float) -> Computed:
        namespace = str(hpa["metadata"].get("namespace") or "")
        selector = await self._validate_selector(hpa, key, scale, now)
        if selector is None:
            return Computed(None, "", [], None, "")
        pods = [p for p in self.pods.store.by_index(BY_NAMESPACE, namespace)
                if selector.matches(p["metadata"].get("labels"))]

        async def fetch() -> list[Obj]:
            return await self.client.pod_metrics(namespace, label_selector=str(selector))

        ctx = MetricContext(namespace=namespace, spec_replicas=scale.spec_replicas, pods=pods,
                            pod_metrics=PodMetricsCache(fetch), calculator=self.calculator,
                            now=now)
        results = []
        for metric in (hpa.get("spec") or {}).get("metrics") or [DEFAULT_METRIC]:
            result = await evaluate(metric, ctx)
            if isinstance(result, Failure):
                await self.recorder.event(hpa, WARNING, result.reason, result.detail)
            results.append(result)
        computed = combine(results, scale.spec_replicas)
        if computed.replicas is None and computed.failure is not None:
            set_condition(hpa, SCALING_ACTIVE, "False", computed.failure.reason,
                          computed.failure.condition_message, now)
        elif computed.replicas is not None:
            set_condition(hpa, SCALING_ACTIVE, "True", "ValidMetricFound",
                          "the HPA was able to successfully calculate a replica count from "
                          f"{computed.metric_name}", now)
        return computed

    async def _validate_selector(self, hpa: Obj, key: str, scale: Scale,
                                 now: float) -> LabelSelector | None:
        """The target's selector; None after reporting it missing, or shared with another
        HPA's target (two HPAs must not scale the same pods)."""
        if not scale.selector:
            await self.recorder.event(hpa, WARNING, "SelectorRequired", "selector is required")
            set_condition(hpa, SCALING_ACTIVE, "False", "InvalidSelector",
                          "the HPA target's scale is missing a selector", now)
            return None
        try:
            selector = LabelSelector.parse(scale.selector)
        except ApiError as err:  # a custom resource's labelSelectorPath is free text
            message = ("couldn't convert selector into a corresponding internal selector "
                       f"object: {err.message}")
            await self.recorder.event(hpa, WARNING, "InvalidSelector", message)
            set_condition(hpa, SCALING_ACTIVE, "False", "InvalidSelector", message, now)
            return None
        self.selectors[key] = selector
        namespace = str(hpa["metadata"].get("namespace") or "")
        pods = [p for p in self.pods.store.by_index(BY_NAMESPACE, namespace)
                if selector.matches(p["metadata"].get("labels"))]
        selecting = sorted(
            other for other, other_selector in self.selectors.items()
            if other.split("/", 1)[0] == namespace and self.hpas.store.get(other) is not None
            and any(other_selector.matches(p["metadata"].get("labels")) for p in pods))
        if len(selecting) > 1:
            message = (f"pods by selector {scale.selector} are controlled by multiple HPAs: "
                       f"[{' '.join(selecting)}]")
            await self.recorder.event(hpa, WARNING, "AmbiguousSelector", message)
            set_condition(hpa, SCALING_ACTIVE, "False", "AmbiguousSelector", message, now)
            return None
        return selector

    async def _rescale(self, hpa: Obj, scale: Scale, desired: int, reason: str,
                       now: float) -> bool:
        """Write the target's spec.replicas; report SuccessfulRescale or FailedRescale."""
        error = await self._update_replicas(scale, desired)
        if error is not None:
            await self.recorder.event(hpa, WARNING, "FailedRescale",
                                      f"New size: {desired}; reason: {reason}; error: {error}")
            set_condition(hpa, ABLE_TO_SCALE, "False", "FailedUpdateScale",
                          f"the HPA controller was unable to update the target scale: {error}",
                          now)
            log.warning("failed to rescale", extra={"hpa": object_key(hpa),
                                                    "replicas": desired, "error": error})
            return False
        set_condition(hpa, ABLE_TO_SCALE, "True", "SucceededRescale",
                      f"the HPA controller was able to update the target scale to {desired}", now)
        await self.recorder.event(hpa, NORMAL, "SuccessfulRescale",
                                  f"New size: {desired}; reason: {reason}")
        log.info("rescaled", extra={"hpa": object_key(hpa), "replicas": desired,
                                    "previous_replicas": scale.spec_replicas,
                                    "reason": reason})
        return True

    async def _update_replicas(self, scale: Scale, desired: int) -> str | None:
        """None once the target's replicas are `desired`, else the error to report."""
        try:
            await update_replicas(self.client, scale, replicas=desired,
                                  attempts=RESCALE_ATTEMPTS)
        except ApiError as err:
            return err.message
        return None

    @staticmethod
    def _set_status(hpa: Obj, current: int, desired: int, statuses: list[Obj] | None, *,
                    rescaled: bool, now: float) -> None:
        old = hpa["status"]
        status: Obj = {"currentReplicas": current, "desiredReplicas": desired}
        last_scale = rfc3339(now) if rescaled else old.get("lastScaleTime")
        if last_scale:
            status["lastScaleTime"] = last_scale
        if statuses:
            status["currentMetrics"] = statuses
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        hpa["status"] = status

    async def _write_status(self, original: Obj, hpa: Obj) -> None:
        if hpa["status"] == original:
            return
        try:
            await self.client.update_status(hpa)
        except ApiError as err:
            if err.reason in (Reason.NOT_FOUND, Reason.CONFLICT):
                log.debug("status not written; next sync retries",
                          extra={"hpa": object_key(hpa), "error": err.message})
                return
            await self.recorder.event(hpa, WARNING, "FailedUpdateStatus", err.message)
            log.warning("failed to update the HPA's status",
                        extra={"hpa": object_key(hpa), "error": err.message})
