"""etcd compaction on an interval (SPEC AU10), as kube-apiserver's compactor does it.

etcd keeps every version of every key until a client compacts its log; without this the
database grows with each write until its space quota raises the NOSPACE alarm. Every
`--etcd-compaction-interval` (Kubernetes' default: 5 minutes; 0 turns it off) each
apiserver tries to claim the interval with a compare-and-swap on the version of etcd's
`compact_rev_key`: the one that wins compacts to etcd's revision as it saw it at its
previous round, one interval earlier, and records that revision in the key; the others see
that someone did and try again one interval later. So several apiservers compact once per
interval between them, and one that dies is replaced within two intervals.

That makes the interval Skiff's history retention too: every version written in the last
interval (and the version each key had then) stays readable - `skiff history`, reads at a
past revision, watches from an old resourceVersion - and older ones answer 410 Expired.
"""

from __future__ import annotations

import asyncio
import logging

from skiff.api.errors import ApiError, Reason
from skiff.apiserver.storage.etcd import EtcdStorage

__all__ = ["Compactor"]

log = logging.getLogger(__name__)


class Compactor:
    """`run()` compacts etcd every `interval` seconds, sharing the work with every other
    apiserver of the same etcd; `compacted` is the last revision this one compacted to."""

    def __init__(self, storage: EtcdStorage, *, interval: float) -> None:
        self.storage = storage
        self.interval = interval
        self.compacted = 0
        # Local view of the claim: the version of `compact_rev_key` last seen, and the
        # revision of etcd at that time (what the next claim compacts to).
        self._version = 0
        self._revision = 0

    async def run(self) -> None:
        """Compact every interval until cancelled; a failed round (etcd unreachable, out
        of space) is logged and the next interval tries again."""
        if self.interval <= 0:
            return
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.compact_once()
            except ApiError as err:
                log.warning("etcd compaction failed; retrying next interval",
                            extra={"error": err.message, "interval": self.interval})
            except Exception as err:  # never let a compaction take the apiserver down
                log.warning("etcd compaction failed; retrying next interval",
                            extra={"error": f"{type(err).__name__}: {err}",
                                   "interval": self.interval})

    async def compact_once(self) -> int:
        """One round: claim the interval and compact; returns the revision compacted to
        (0 when another apiserver had it, or on the first round, which only claims)."""
        claimed, version, head, held = await self.storage.compact_cas(
            expect_version=self._version, revision=self._revision)
        previous = self._revision
        self._version, self._revision = version, head
        if not claimed:
            # Another apiserver compacted this interval (to `held`): try again next one.
            if held:
                self.compacted = max(self.compacted, held)
            return 0
        if previous == 0:
            return 0  # the first claim only records where the next compaction goes
        try:
            await self.storage.compact(previous, physical=False)
        except ApiError as err:
            if err.reason != Reason.GONE:
                raise
            # Compacted further already (by hand, e.g. `etcdctl compact`): nothing to do.
            return 0
        self.compacted = previous
        log.info("etcd compacted", extra={"revision": previous, "interval": self.interval})
        return previous
