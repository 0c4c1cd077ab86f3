"""SPEC DO3: a create is traced over OTLP through the apiserver, with etcd calls as children,
and the trace context is stored on the object for the next component to continue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skiff.client import ApiClient
from skiff.tracing import TRACE_ANNOTATION
from tests.integration.cluster import Cluster
from tests.integration.objects import pod
from tests.integration.otlp_receiver import OtlpReceiver
from tests.integration.waiting import get_or_none, wait_for


async def test_do3_create_exports_a_span_with_etcd_calls_as_children(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        cluster = Cluster(tmp_path, apiserver_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100"})
        try:
            cluster.start()
            async with ApiClient(cluster.api_target) as api:
                created = await api.create(pod("traced", "default"))
            spans = receiver.wait_for(
                lambda got: any(s.name == "/skiff.v1.Api/Create" for s in got)
                and any(s.name == "/etcdserverpb.KV/Txn" for s in got), timeout=20)
        finally:
            cluster.stop()

    create = next(s for s in spans if s.name == "/skiff.v1.Api/Create")
    assert create.service_name == "skiff-apiserver"
    children = [s for s in spans if s.parent_span_id == create.span_id]
    names = {s.name for s in children}
    assert "/etcdserverpb.KV/Txn" in names, names
    assert all(s.trace_id == create.trace_id for s in children)
    # The object carries the trace so the scheduler and kubelet can continue it.
    traceparent = created["metadata"]["annotations"][TRACE_ANNOTATION]
    assert traceparent.split("-")[1] == create.trace_id


CREATE_SPANS = {"skiff-apiserver": {"/skiff.v1.Api/Create", "/etcdserverpb.KV/Txn",
                                    "/skiff.v1.Api/Bind"},
                "skiff-scheduler": {"scheduler.schedule", "scheduler.bind"},
                "skiff-kubelet": {"kubelet.start_pod"}}
DELETE_SPANS = {"skiff-apiserver": {"/skiff.v1.Api/Delete"},
                "skiff-kubelet": {"kubelet.kill_pod"}}


def _has(spans: Any, trace: str, expected: dict[str, set[str]]) -> bool:
    """Every expected (service, span name) of `trace` has arrived."""
    got = {(s.service_name, s.name) for s in spans if s.trace_id == trace}
    return all((service, name) in got for service, names in expected.items() for name in names)


async def test_do3_one_trace_follows_a_pod_from_create_to_kubelet_start_and_delete(
        tmp_path: Path) -> None:
    """Create: apiserver (etcd calls inside) → scheduler → binding → kubelet start, one trace.
    Delete: apiserver → kubelet kill, one trace. The context travels on the object."""
    with OtlpReceiver() as receiver:
        otel = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "100"}
        cluster = Cluster(tmp_path, apiserver_env=otel)
        try:
            cluster.start()
            cluster.add_service("scheduler", "skiff.scheduler", [], env=otel)
            cluster.add_service("kubelet-n1", "skiff.kubelet", [
                "--node-name", "n1", "--root-dir", str(tmp_path / "n1"),
                "--node-status-update-frequency", "1s"], env=otel)
            async with ApiClient(cluster.api_target) as api:
                created = await api.create(pod("traced", "default", grace=2))
                create_trace = created["metadata"]["annotations"][TRACE_ANNOTATION].split("-")[1]
                # Each service exports on its own schedule: wait for every expected span.
                spans = receiver.wait_for(lambda got: _has(got, create_trace, CREATE_SPANS),
                                          timeout=60)
                deleted = await api.delete("pods", "traced", "default")
                delete_trace = deleted["object"]["metadata"]["annotations"][
                    TRACE_ANNOTATION].split("-")[1]
                spans = receiver.wait_for(lambda got: _has(got, delete_trace, DELETE_SPANS),
                                          timeout=60)


                async def gone() -> bool:
                    return await get_or_none(api, "pods", "traced", "default") is None

                # The kubelet finishes the pod (grace 2 s) before the cluster stops.
                await wait_for(gone, timeout=30, what="the traced pod to be removed")
        finally:
            cluster.stop()

    def services(trace: str) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for s in spans:
            if s.trace_id == trace:
                found.setdefault(s.service_name, set()).add(s.name)
        return found

    create = services(create_trace)
    for service, names in CREATE_SPANS.items():
        assert names <= create.get(service, set()), (service, create)
    delete = services(delete_trace)
    for service, names in DELETE_SPANS.items():
        assert names <= delete.get(service, set()), (service, delete)
    assert delete_trace != create_trace
