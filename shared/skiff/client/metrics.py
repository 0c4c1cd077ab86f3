"""Resource usage from a kubelet (SPEC AX5): `/skiff.v1.Kubelet/ResourceMetrics` on its
gRPC port answers `{"nodes": [{name, timestamp, window, cpu, memory}], "pods": [{node,
namespace, name, timestamp, window, containers: [{name, cpu, memory}]}]}` with cpu in
nanocores and memory (working set) in bytes; the apiserver serves them as
metrics.k8s.io/v1beta1."""

from __future__ import annotations

from typing import Any

import grpc

from skiff.client.credentials import Credentials
from skiff.client.kubelet import kubelet_channel
from skiff.client.logs import SERVICE, _unavailable
from skiff.rpc.codec import decode_map, encode

METRICS_METHOD_NAME = "ResourceMetrics"
METRICS_METHOD = f"/{SERVICE}/{METRICS_METHOD_NAME}"

__all__ = ["METRICS_METHOD", "METRICS_METHOD_NAME", "SERVICE", "fetch_resource_metrics"]


async def fetch_resource_metrics(target: str, *, timeout: float = 10.0,
                                 credentials: Credentials | None = None) -> dict[str, Any]:
    """The kubelet at `target` (host:port)'s latest node and pod usage."""
    async with kubelet_channel(target, credentials) as channel:
        call = channel.unary_unary(METRICS_METHOD)
        try:
            data = await call(encode({}), timeout=timeout)
        except grpc.aio.AioRpcError as err:
            raise _unavailable(target, err) from None
    return dict(decode_map(data))
