"""Fluent builders of test objects, after Kubernetes' `st.MakePod()` / `st.MakeNode()`.

Tests across Skiff build pods and nodes as tables of cases:
`make_pod("p").label("foo", "").container("c", command=["sleep", "1"]).node("n1").obj()`.
Each `obj()` returns a fresh deep copy, so one builder can seed several cases.
"""

from __future__ import annotations

import copy
from typing import Any, Self

from skiff.api.wellknown import LABEL_HOSTNAME

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "PreferNoSchedule", "NoExecute"


def _resources(requests: dict[str, str] | None,
               limits: dict[str, str] | None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    return resources


class PodBuilder:
    """Builds a Pod dict; the namespace defaults to "default"."""

    def __init__(self, name: str) -> None:
        self._pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": []},
        }

    @property
    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self._pod["metadata"]
        return meta

    @property
    def _spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self._pod["spec"]
        return spec

    def _status(self) -> dict[str, Any]:
        status: dict[str, Any] = self._pod.setdefault("status", {})
        return status

    def _last_container(self) -> dict[str, Any]:
        if not self._spec["containers"]:
            self.container("c", command=["sleep", "3600"])
        container: dict[str, Any] = self._spec["containers"][-1]
        return container

    # metadata
    def namespace(self, namespace: str) -> Self:
        self._meta["namespace"] = namespace
        return self

    def uid(self, uid: str) -> Self:
        self._meta["uid"] = uid
        return self

    def label(self, key: str, value: str) -> Self:
        self._meta.setdefault("labels", {})[key] = value
        return self

    def labels(self, labels: dict[str, str]) -> Self:
        self._meta.setdefault("labels", {}).update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._meta.setdefault("annotations", {})[key] = value
        return self

    def owner(self, kind: str, name: str, *, uid: str = "", api_version: str = "apps/v1",
              controller: bool = True) -> Self:
        self._meta.setdefault("ownerReferences", []).append({
            "apiVersion": api_version, "kind": kind, "name": name, "uid": uid or f"{name}-uid",
            "controller": controller, "blockOwnerDeletion": True})
        return self

    def creation_timestamp(self, timestamp: str) -> Self:
        self._meta["creationTimestamp"] = timestamp
        return self

    def terminating(self, deletion_timestamp: str = "2024-01-01T00:00:00Z", *,
                    grace_period_seconds: int = 30) -> Self:
        self._meta["deletionTimestamp"] = deletion_timestamp
        self._meta["deletionGracePeriodSeconds"] = grace_period_seconds
        return self

    def finalizer(self, name: str) -> Self:
        self._meta.setdefault("finalizers", []).append(name)
        return self

    # containers
    def container(self, name: str, *, command: list[str] | None = None,
                  args: list[str] | None = None, image: str | None = None,
                  requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
                  ports: list[int] | None = None) -> Self:
        self._spec["containers"].append(
            self._make_container(name, command, args, image, requests, limits, ports))
        return self

    def init_container(self, name: str, *, command: list[str] | None = None,
                       args: list[str] | None = None, image: str | None = None,
                       requests: dict[str, str] | None = None,
                       restart_policy: str | None = None) -> Self:
        container = self._make_container(name, command, args, image, requests, None, None)
        if restart_policy is not None:
            container["restartPolicy"] = restart_policy
        self._spec.setdefault("initContainers", []).append(container)
        return self

    @staticmethod
    def _make_container(name: str, command: list[str] | None, args: list[str] | None,
                        image: str | None, requests: dict[str, str] | None,
                        limits: dict[str, str] | None,
                        ports: list[int] | None) -> dict[str, Any]:
        container: dict[str, Any] = {"name": name}
        if image is not None:
            container["image"] = image
        if command is not None:
            container["command"] = list(command)
        elif image is None:
            container["command"] = ["sleep", "3600"]
        if args is not None:
            container["args"] = list(args)
        resources = _resources(requests, limits)
        if resources:
            container["resources"] = resources
        if ports:
            container["ports"] = [{"containerPort": p} for p in ports]
        return container

    def req(self, requests: dict[str, str]) -> Self:
        """Add a container named `c<n>` with these resource requests (Kubernetes' `Req`)."""
        index = len(self._spec["containers"])
        return self.container(f"c{index}", requests=requests)

    def probe(self, which: str, probe: dict[str, Any]) -> Self:
        """Set `livenessProbe`/`readinessProbe`/`startupProbe` of the last container."""
        self._last_container()[which] = copy.deepcopy(probe)
        return self

    def lifecycle(self, hook: str, handler: dict[str, Any]) -> Self:
        """Set `postStart`/`preStop` of the last container."""
        self._last_container().setdefault("lifecycle", {})[hook] = copy.deepcopy(handler)
        return self

    def volume(self, name: str, source: dict[str, Any] | None = None) -> Self:
        volume = {"name": name, **(source or {"emptyDir": {}})}
        self._spec.setdefault("volumes", []).append(volume)
        return self

    # spec
    def node(self, node_name: str) -> Self:
        self._spec["nodeName"] = node_name
        return self

    def node_selector(self, selector: dict[str, str]) -> Self:
        self._spec["nodeSelector"] = dict(selector)
        return self

    def priority(self, value: int) -> Self:
        self._spec["priority"] = value
        return self

    def priority_class(self, name: str) -> Self:
        self._spec["priorityClassName"] = name
        return self

    def preemption_policy(self, policy: str) -> Self:
        self._spec["preemptionPolicy"] = policy
        return self

    def restart_policy(self, policy: str) -> Self:
        self._spec["restartPolicy"] = policy
        return self

    def termination_grace_period(self, seconds: int) -> Self:
        self._spec["terminationGracePeriodSeconds"] = seconds
        return self

    def toleration(self, key: str = "", *, operator: str = "Equal", value: str = "",
                   effect: str = "", seconds: int | None = None) -> Self:
        toleration: dict[str, Any] = {"key": key, "operator": operator, "effect": effect}
        if value:
            toleration["value"] = value
        if seconds is not None:
            toleration["tolerationSeconds"] = seconds
        self._spec.setdefault("tolerations", []).append(toleration)
        return self

    def spread(self, max_skew: int, topology_key: str, when_unsatisfiable: str,
               selector: dict[str, Any] | None, *, min_domains: int | None = None,
               match_label_keys: list[str] | None = None) -> Self:
        constraint: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": topology_key,
                                      "whenUnsatisfiable": when_unsatisfiable}
        if selector is not None:
            constraint["labelSelector"] = copy.deepcopy(selector)
        if min_domains is not None:
            constraint["minDomains"] = min_domains
        if match_label_keys is not None:
            constraint["matchLabelKeys"] = list(match_label_keys)
        self._spec.setdefault("topologySpreadConstraints", []).append(constraint)
        return self

    def scheduling_gate(self, name: str) -> Self:
        self._spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def readiness_gate(self, condition_type: str) -> Self:
        self._spec.setdefault("readinessGates", []).append({"conditionType": condition_type})
        return self

    # status
    def phase(self, phase: str) -> Self:
        self._status()["phase"] = phase
        return self

    def condition(self, condition_type: str, status: str = "True", *, reason: str = "",
                  message: str = "") -> Self:
        condition = {"type": condition_type, "status": status}
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        self._status().setdefault("conditions", []).append(condition)
        return self

    def nominated_node_name(self, node_name: str) -> Self:
        self._status()["nominatedNodeName"] = node_name
        return self

    def start_time(self, timestamp: str) -> Self:
        self._status()["startTime"] = timestamp
        return self

    def obj(self) -> dict[str, Any]:
        """The pod as a fresh dict; a pod without containers gets one `sleep` container."""
        self._last_container()
        return copy.deepcopy(self._pod)


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._node: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {LABEL_HOSTNAME: name}},
            "spec": {},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }

    def label(self, key: str, value: str) -> Self:
        self._node["metadata"]["labels"][key] = value
        return self

    def capacity(self, resources: dict[str, str]) -> Self:
        """Set capacity and allocatable (Kubernetes' `Capacity`)."""
        self._node["status"]["capacity"].update(resources)
        self._node["status"]["allocatable"].update(resources)
        return self

    def taint(self, key: str, effect: str, value: str = "") -> Self:
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        self._node["spec"].setdefault("taints", []).append(taint)
        return self

    def unschedulable(self, unschedulable: bool = True) -> Self:
        self._node["spec"]["unschedulable"] = unschedulable
        return self

    def condition(self, condition_type: str, status: str) -> Self:
        self._node["status"].setdefault("conditions", []).append(
            {"type": condition_type, "status": status})
        return self

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._node)


def make_pod(name: str = "p") -> PodBuilder:
    return PodBuilder(name)


def make_node(name: str = "n1") -> NodeBuilder:
    return NodeBuilder(name)
