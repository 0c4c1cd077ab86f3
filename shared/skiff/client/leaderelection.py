"""Leader election on a Lease, as client-go's `tools/leaderelection`, so two
controller-managers can run and only one acts.

The record lives in `spec` of a `coordination.k8s.io/v1` Lease (holderIdentity,
leaseDurationSeconds, acquireTime, renewTime, leaseTransitions). A candidate may take the
lease when nobody holds it, or when the record has not *changed* for leaseDurationSeconds
as timed by the candidate's own monotonic clock (client-go's observedTime, so clock skew
between machines does not matter). Every write is a compare-and-swap on resourceVersion,
so two candidates never both win. The leader renews every retry period; if it cannot renew
for `renew_deadline` it stops leading (controllers are cancelled) before anyone else may
take over (`lease_duration` > `renew_deadline`). On a clean stop it releases the lease so a
standby takes over at once.

Beyond client-go, each term sets the client's `leader_epoch` (the Lease, our identity and its
leaseTransitions): the client sends it with destructive writes and the apiserver refuses them
once the Lease moved on (see `skiff.rpc.epoch`). It is kept, not cleared, after the term
ends, so a write still in flight from a deposed leader carries the stale epoch and is refused.
Used by the controller-manager (lease kube-system/skiff-controller-manager) and the
scheduler (kube-system/kube-scheduler).

As kube-controller-manager and kube-scheduler do, the Lease is read and written on a
connection of its own (`election_client`), so renewals do not queue behind the controllers'
traffic, and an attempt may take until the renew deadline (client-go's timeout context):
on a loaded machine a renewal slower than the retry period is still a renewal.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client.api import ApiClient
from skiff.client.interface import Client
from skiff.clock import REAL_CLOCK, Clock, rfc3339_micro
from skiff.rpc.epoch import LeaderEpoch
from skiff.tasks import cancel_tasks

log = logging.getLogger(__name__)


JITTER_FACTOR = 1.2  # client-go's JitterFactor for the acquire loop


@dataclass(frozen=True)
class LeaderElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "leader election: need lease duration > renew deadline > retry period > 0, "
                f"got {self.lease_duration}s, {self.renew_deadline}s, {self.retry_period}s "
                "(--leader-elect-lease-duration, --leader-elect-renew-deadline, "
                "--leader-elect-retry-period)")


@dataclass(frozen=True)
class LeaderElectionRecord:
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    lease_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Obj) -> LeaderElectionRecord:
        spec = lease.get("spec") or {}
        return cls(holder_identity=str(spec.get("holderIdentity") or ""),
                   lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
                   acquire_time=str(spec.get("acquireTime") or ""),
                   renew_time=str(spec.get("renewTime") or ""),
                   lease_transitions=int(spec.get("leaseTransitions") or 0))

    def to_spec(self) -> Obj:
        return {"holderIdentity": self.holder_identity,
                "leaseDurationSeconds": max(1, self.lease_duration_seconds),
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.lease_transitions}


def held_by_other(record: LeaderElectionRecord, *, identity: str, observed_at: float,
                  now: float) -> bool:
    """Whether someone else validly holds the lease: named, and its record changed less
    than leaseDurationSeconds ago by our monotonic clock (`observed_at`, `now`)."""
    if not record.holder_identity or record.holder_identity == identity:
        return False
    return observed_at + record.lease_duration_seconds > now


def election_client(apiserver: str, config: LeaderElectionConfig, *,
                    user_agent: str) -> ApiClient:
    """The Lease's own connection. Kubernetes gives its leader-election client the renew
    deadline as timeout; Skiff gives half of it (at least the retry period), so a call to an
    apiserver that does not answer times out, and the client moves to the next apiserver,
    while the term can still be renewed there."""
    timeout = max(config.retry_period, config.renew_deadline / 2)
    return ApiClient(apiserver, user_agent=f"{user_agent}/leader-election", timeout=timeout,
                     retry_seconds=config.renew_deadline)


class LeaderElector:
    """`await elector.run(lead=..., stop=...)`: calls `lead()` while leading.

    `client` reads and writes the Lease; each term's epoch is set on it and on every client
    in `fenced` (the ones the leader's controllers write with)."""

    def __init__(self, *, client: Client, config: LeaderElectionConfig,
                 clock: Clock = REAL_CLOCK, fenced: Sequence[Client] = ()) -> None:
        self.client = client
        self.fenced = [client, *(f for f in fenced if f is not client)]
        self.config = config
        self.clock = clock
        self.is_leader = False
        self._observed: LeaderElectionRecord | None = None
        self._observed_at = 0.0
        self._last_renew = 0.0

    # -- one attempt ------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One client-go `tryAcquireOrRenew`: True when we hold the lease afterwards."""
        c = self.config
        now_wall = rfc3339_micro(self.clock.now())
        try:
            lease = await self.client.get("leases", c.name, c.namespace)
        except ApiError as err:
            if err.reason != Reason.NOT_FOUND:
                raise
            record = LeaderElectionRecord(
                holder_identity=c.identity, lease_duration_seconds=round(c.lease_duration),
                acquire_time=now_wall, renew_time=now_wall)
            try:
                await self.client.create({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": c.name, "namespace": c.namespace},
                    "spec": record.to_spec()})
            except ApiError as create_err:
                if create_err.reason == Reason.ALREADY_EXISTS:
                    return False
                raise
            self._hold(record)
            return True
        old = LeaderElectionRecord.from_lease(lease)
        if old != self._observed:
            self._observe(old)
        now = self.clock.monotonic()
        if held_by_other(old, identity=c.identity, observed_at=self._observed_at, now=now):
            return False
        if old.holder_identity == c.identity:
            record = LeaderElectionRecord(
                holder_identity=c.identity, lease_duration_seconds=round(c.lease_duration),
                acquire_time=old.acquire_time or now_wall, renew_time=now_wall,
                lease_transitions=old.lease_transitions)
        else:
            record = LeaderElectionRecord(
                holder_identity=c.identity, lease_duration_seconds=round(c.lease_duration),
                acquire_time=now_wall, renew_time=now_wall,
                lease_transitions=old.lease_transitions + 1)
        updated = dict(lease)
        updated["spec"] = record.to_spec()
        try:
            await self.client.update(updated)  # CAS: carries the resourceVersion we read
        except ApiError as err:
            if err.reason in (Reason.CONFLICT, Reason.NOT_FOUND):
                return False
            raise
        self._hold(record)
        return True

    def _hold(self, record: LeaderElectionRecord) -> None:
        """We hold the lease as `record` says: our destructive writes carry this term."""
        self._observe(record)
        c = self.config
        epoch = LeaderEpoch(c.namespace, c.name, c.identity, record.lease_transitions)
        for client in self.fenced:
            client.leader_epoch = epoch

    def _observe(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_at = self.clock.monotonic()

    async def release(self) -> None:
        """Give the lease up (holder "" and a 1 s duration) if we hold it."""
        c = self.config
        try:
            lease = await self.client.get("leases", c.name, c.namespace)
            old = LeaderElectionRecord.from_lease(lease)
            if old.holder_identity != c.identity:
                return
            now_wall = rfc3339_micro(self.clock.now())
            released = dict(lease)
            released["spec"] = LeaderElectionRecord(
                holder_identity="", lease_duration_seconds=1, acquire_time=now_wall,
                renew_time=now_wall, lease_transitions=old.lease_transitions).to_spec()
            await self.client.update(released)
            log.info("released the leader lease", extra={"lease": f"{c.namespace}/{c.name}"})
        except ApiError as err:
            log.warning("could not release the leader lease", extra={"error": err.message})

    # -- the loops --------------------------------------------------------------------------

    async def _attempt(self, timeout: float) -> bool:
        try:
            async with asyncio.timeout(max(timeout, 0.001)):
                return await self.try_acquire_or_renew()
        except (ApiError, TimeoutError) as err:
            log.info("leader election attempt failed",
                     extra={"error": getattr(err, "message", None) or type(err).__name__})
            return False

    async def _acquire(self) -> None:
        """Until we hold the lease; retry every retry period with jitter."""
        c = self.config
        while True:
            if await self._attempt(c.renew_deadline):
                self._last_renew = self.clock.monotonic()
                return
            await self.clock.sleep(c.retry_period * (1 + random.random() * JITTER_FACTOR))

    async def _renew(self) -> None:
        """Renew every retry period; return once renewing failed for `renew_deadline`."""
        c = self.config
        while True:
            await self.clock.sleep(c.retry_period)
            while True:
                remaining = self._last_renew + c.renew_deadline - self.clock.monotonic()
                if remaining <= 0:
                    return
                if await self._attempt(remaining):
                    self._last_renew = self.clock.monotonic()
                    break
                if self._observed is not None and held_by_other(
                        self._observed, identity=c.identity, observed_at=self._observed_at,
                        now=self.clock.monotonic()):
                    return  # someone else took it: we are not the leader any more
                left = self._last_renew + c.renew_deadline - self.clock.monotonic()
                await self.clock.sleep(min(c.retry_period, max(left, 0.0)))

    async def run(self, *, lead: Callable[[], Coroutine[Any, Any, None]],
                  stop: asyncio.Event) -> None:
        """Campaign, lead while holding the lease, campaign again after losing it; return
        (releasing the lease) once `stop` is set."""
        c = self.config
        while not stop.is_set():
            stopper = asyncio.create_task(stop.wait(), name="leader-election-stop")
            acquirer = asyncio.create_task(self._acquire(), name="leader-election-acquire")
            await asyncio.wait({stopper, acquirer}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                await cancel_tasks(acquirer, stopper)
                if acquirer.done() and not acquirer.cancelled():
                    await self.release()
                return
            self.is_leader = True
            log.info("became leader", extra={"lease": f"{c.namespace}/{c.name}",
                                             "identity": c.identity})
            leading = asyncio.create_task(lead(), name="leading")
            renewer = asyncio.create_task(self._renew(), name="leader-election-renew")
            await asyncio.wait({stopper, leading, renewer},
                               return_when=asyncio.FIRST_COMPLETED)
            self.is_leader = False
            await cancel_tasks(leading, renewer, stopper)
            if leading.done() and not leading.cancelled():
                await self.release()
                error = leading.exception()
                raise RuntimeError("the controllers stopped on their own") from error
            if stop.is_set():
                await self.release()
                return
            log.error("leaderelection lost: stopped leading; controllers stopped",
                      extra={"lease": f"{c.namespace}/{c.name}", "identity": c.identity})
