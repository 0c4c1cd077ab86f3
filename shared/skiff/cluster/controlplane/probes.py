"""The control-plane agent's probes of the components behind its mirror pods, on the
periods of kubeadm's static pod manifests, over connections kept open.

kubeadm gives kube-apiserver a readiness probe every second (`/readyz`, which fails while it
cannot reach etcd) and etcd, kube-scheduler and kube-controller-manager startup and liveness
probes every 10 s and no readiness probe. So the agent probes an apiserver at every sync; any
other component at every sync until it first answers healthy (its startup probe), then every
`period`. A process that changed (restarted, new PID) starts over, and a process that is not
running is not ready without a probe.

Before, every sync (each second) checked every component on a new connection — for an
apiserver and etcd a new TLS handshake on both sides — which was the largest share of an idle
`skiff up` cluster's CPU after the apiserver's own. A gRPC check now goes over a channel kept
per process (closed when the process changes, so a restarted component is not probed
through a channel in reconnect backoff); etcd's HTTP /health, every `period`, opens its own.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from skiff.cluster.controlplane.mirror import StaticPod
from skiff.cluster.state import Component, grpc_health, health_channel, health_of, same_process

__all__ = ["Probes", "READINESS_PROBED"]

# The kubeadm components probed for readiness at every sync; the others are live once
# started, and checked every `period`.
READINESS_PROBED = frozenset({"kube-apiserver"})


@dataclass
class _Probed:
    """What the agent knows of one component's process: its last probe, and (gRPC
    components) the channel its probes go over while that process runs."""

    pid: int
    channel: grpc.aio.Channel | None = None
    healthy: bool = False
    at: float = -math.inf  # the clock's time of the last probe


@dataclass
class Probes:
    period: float = 10.0  # kubeadm's livenessProbe periodSeconds
    clock: Callable[[], float] = time.monotonic
    _seen: dict[str, _Probed] = field(default_factory=dict)

    async def ready(self, pod: StaticPod, comp: Component) -> bool:
        """Whether `comp` counts as ready now, probing it if its period says so. A
        `--netns` component's recorded address is the gateway's, which the agent on its
        own host does not reach: there the running process is taken as ready."""
        seen = self._seen.get(comp.name)
        running = same_process(comp)  # reads /proc: once a sync
        if seen is not None and (seen.pid != comp.pid or not running):
            await self._forget(comp.name)  # restarted or gone: start over
            seen = None
        if not running:
            return False
        if comp.netns:
            return True
        if seen is None:
            seen = self._seen[comp.name] = _Probed(comp.pid)
        now = self.clock()
        if seen.healthy and pod.kubeadm not in READINESS_PROBED and \
                now - seen.at < self.period:
            return True
        seen.healthy, seen.at = await self._probe(comp, seen), now
        return seen.healthy

    async def _probe(self, comp: Component, seen: _Probed) -> bool:
        if not comp.health:  # etcd: its HTTP /health, a blocking call
            result = await asyncio.to_thread(lambda: asyncio.run(health_of(comp)))
            return result == "healthy"
        if seen.channel is None:
            seen.channel = health_channel(comp)
        return await grpc_health(seen.channel) == "healthy"

    async def _forget(self, name: str) -> None:
        seen = self._seen.pop(name, None)
        if seen is not None and seen.channel is not None:
            await seen.channel.close()

    async def close(self) -> None:
        channels = [s.channel for s in self._seen.values() if s.channel is not None]
        self._seen.clear()
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)
