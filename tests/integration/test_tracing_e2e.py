"""SPEC DO3: a create is traced over OTLP through the apiserver, with etcd calls as children,
and the trace context is stored on the object for the next component to continue."""

from __future__ import annotations

from pathlib import Path

from skiff.client import ApiClient
from skiff.tracing import TRACE_ANNOTATION
from tests.integration.cluster import Cluster
from tests.integration.objects import pod
from tests.integration.otlp_receiver import OtlpReceiver


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
