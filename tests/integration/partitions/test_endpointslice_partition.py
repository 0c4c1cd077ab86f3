"""A Service's EndpointSlice drops the pod of a node cut off by a real network
partition (nftables, not a stopped kubelet) and takes it back after the cut heals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from skiff.client import ApiClient
from skiff.cluster.netns.cluster import NetnsCluster
from tests.integration.partitions.conftest import (
    GRACE_SECONDS,
    NAMESPACE,
    StartCluster,
    node_ready_status,
    wait_for,
)

Connect = Callable[[NetnsCluster], Awaitable[ApiClient]]
APP = "ep-backend"


async def _endpoints(api: ApiClient) -> dict[str, tuple[str, bool]]:
    """pod name -> (node, ready) from the Service's EndpointSlices."""
    slices = (await api.list("endpointslices", NAMESPACE,
                             label_selector=f"kubernetes.io/service-name={APP}"))["items"]
    return {e["targetRef"]["name"]: (e.get("nodeName", ""), bool(e["conditions"]["ready"]))
            for es in slices for e in es.get("endpoints") or []}


async def test_endpointslice_drops_the_pod_of_a_partitioned_node_and_takes_it_back(
        netns_cluster: StartCluster, api_of: Connect) -> None:
    cluster = netns_cluster(nodes=3)
    api = await api_of(cluster)
    labels = {"app": APP}
    await api.create({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": APP, "namespace": NAMESPACE},
        "spec": {"replicas": 3, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"terminationGracePeriodSeconds": 1,
                     # stays bound through the cut (no eviction), so it can come back
                     "tolerations": [{"key": f"node.kubernetes.io/{k}", "operator": "Exists",
                                      "effect": "NoExecute", "tolerationSeconds": 3600}
                                     for k in ("unreachable", "not-ready")],
                     "affinity": {"podAntiAffinity": {
                         "requiredDuringSchedulingIgnoredDuringExecution": [{
                             "labelSelector": {"matchLabels": labels},
                             "topologyKey": "kubernetes.io/hostname"}]}},
                     "containers": [{"name": "main", "image": "nginx"}]}}}})
    await api.create({"apiVersion": "v1", "kind": "Service",
                      "metadata": {"name": APP, "namespace": NAMESPACE},
                      "spec": {"selector": labels, "ports": [{"port": 80,
                                                              "targetPort": 8080}]}})

    async def three_ready() -> dict[str, tuple[str, bool]] | None:
        eps = await _endpoints(api)
        return eps if len(eps) == 3 and all(r for _, r in eps.values()) else None

    eps = await wait_for(three_ready, timeout=120, what="three ready endpoints")
    victim, (node, _) = next((n, e) for n, e in sorted(eps.items()) if e[0] == "node-1")

    cluster.partition(node)
    try:
        async def unknown() -> bool:
            return await node_ready_status(api, node) == "Unknown"

        await wait_for(unknown, timeout=GRACE_SECONDS + 20, what=f"{node} Ready=Unknown")

        async def dropped() -> dict[str, tuple[str, bool]] | None:
            eps = await _endpoints(api)
            return eps if victim in eps and not eps[victim][1] else None

        eps = await wait_for(dropped, timeout=60,
                             what=f"{victim} of the partitioned {node} out of the ready set")
        assert sum(1 for _, r in eps.values() if r) == 2
    finally:
        cluster.heal(node)

    async def back() -> bool:
        eps = await _endpoints(api)
        return victim in eps and eps[victim][1] and all(r for _, r in eps.values())

    await wait_for(back, timeout=90, what=f"{victim} back in the ready set after heal")
