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
class _Last:
    pid: int
    healthy: bool
    at: float  # the clock's time of the probe


@dataclass
class Probes:
    period: float = 10.0  # kubeadm's livenessProbe periodSeconds
    clock: Callable[[], float] = time.monotonic
    _last: dict[str, _Last] = field(default_factory=dict)
    _channels: dict[str, tuple[int, grpc.aio.Channel]] = field(default_factory=dict)

    async def ready(self, pod: StaticPod, comp: Component) -> bool:
        """Whether `comp` counts as ready now, probing it if its period says so. A
        `--netns` component's recorded address is the gateway's, which the agent on its
        own host does not reach: there the running process is taken as ready."""
        if not same_process(comp):
            await self._forget(comp.name)
            return False
        if comp.netns:
            return True
        last = self._last.get(comp.name)
        now = self.clock()
        if last is not None and last.pid == comp.pid and last.healthy and \
                pod.kubeadm not in READINESS_PROBED and now - last.at < self.period:
            return True
        healthy = await self._probe(comp)
        self._last[comp.name] = _Last(comp.pid, healthy, now)
        return healthy

    async def _probe(self, comp: Component) -> bool:
        if not comp.health:  # etcd: its HTTP /health, a blocking call
            result = await asyncio.to_thread(lambda: asyncio.run(health_of(comp)))
            return result == "healthy"
        held = self._channels.get(comp.name)
        if held is not None and held[0] != comp.pid:
            await held[1].close()
            held = None
        if held is None:
            held = self._channels[comp.name] = (comp.pid, health_channel(comp))
        return await grpc_health(held[1]) == "healthy"

    async def _forget(self, name: str) -> None:
        self._last.pop(name, None)
        held = self._channels.pop(name, None)
        if held is not None:
            await held[1].close()

    async def close(self) -> None:
        channels = [channel for _, channel in self._channels.values()]
        self._channels.clear()
        await asyncio.gather(*(c.close() for c in channels), return_exceptions=True)
