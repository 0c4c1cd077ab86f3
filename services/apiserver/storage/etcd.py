"""etcd v3 storage (SPEC AS3–AS6): the apiserver is the only etcd client.

Every write is one etcd transaction whose compare is on `mod_revision`, so a stale
resourceVersion is a Conflict and a create of an existing key is AlreadyExists. Reads `at` a
past revision and an object's history come straight from etcd's MVCC log. Transport failures
(etcd down) surface as ServiceUnavailable after bounded retries (retry.py).

A write's outcome can be unknown: etcd did not answer in time, or the connection broke
(UNAVAILABLE, or the client closed under the call by another request's failover) after the
transaction may have reached etcd. Retrying it is safe (its compare makes a duplicate
fail), but a compare that then fails may have failed on this very write: such a write is
answered as kube-apiserver answers a write it cannot confirm, 504 Timeout "the server was
unable to return a response in the time allotted, but may still be processing the
request", never a Conflict or AlreadyExists for a write that happened.

Leader fencing (Skiff's addition, see skiff.rpc.epoch): while `leader_epoch` is set for the
request, every transaction first reads the Lease it names, refuses (403 Forbidden) unless the
Lease still has that holder and leaseTransitions, and adds a compare on the Lease key's
mod_revision, so the check and the write are one atomic etcd transaction. A compare that
failed only because the leader renewed in between is retried.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aetcd
import aetcd.exceptions
import aetcd.rpc as etcdrpc
import aetcd.utils
import grpc
import tenacity

from skiff.api.errors import ApiError, Reason
from skiff.api.kinds import REGISTRY_PREFIX
from skiff.api.types import Obj
from skiff.apiserver.storage.fencing import EPOCH_ATTEMPTS, leader_epoch, lease_key, lease_term
from skiff.apiserver.storage.leases import LeaseReuse
from skiff.apiserver.storage.retry import (
    ClientClosed,
    EtcdOverloaded,
    call_once,
    during_election,
    fails_over,
    no_space,
    overloaded,
    transient,
)
from skiff.apiserver.storage.values import (
    COMPACT_REV_KEY,
    EXPIRED_GET,
    EXPIRED_LIST,
    EXPIRED_WATCH,
    LIST_PAGE,
    KeyValue,
    LeaderFenced,
    ListPage,
    RawEvent,
    ambiguous_write_error,
    decode_value,
    encode_value,
    no_space_error,
)
from skiff.etcdtls import EtcdTls, TlsEtcdClient
from skiff.rpc.epoch import LeaderEpoch

log = logging.getLogger(__name__)

T = TypeVar("T")

# Range reads are paginated (`LIST_PAGE` keys a request), so no reply nears this; it only has
# to hold one page of the largest objects (1.5 MiB each) and etcd's own request limit.
_ETCD_MAX_MESSAGE = 256 * 1024 * 1024




class EtcdStorage:
    """Typed, retried access to etcd for the registry and the watch cache."""

    def __init__(self, endpoint: str, *, request_timeout: float = 5.0,
                 retry_seconds: float = 10.0, tls: EtcdTls | None = None) -> None:
        self._tls = tls
        # `--etcd-servers` may list several members, comma-separated, as kube-apiserver's:
        # requests go to one and move to the next when it fails or cannot reach a quorum.
        self.endpoints = [e.strip() for e in endpoint.split(",") if e.strip()]
        if not self.endpoints:
            raise ValueError(f"--etcd-servers: no etcd URL in {endpoint!r}")
        self._index = 0
        self._timeout = request_timeout
        self._retry_seconds = retry_seconds
        self._client = self._new_client()
        self._closing: set[asyncio.Task[None]] = set()
        # The watch cache's newest copy of a key (set by the apiserver): a leader's Lease
        # taken from it saves the etcd read before each fenced write (see `_txn`).
        self.recent: Callable[[str], RawEvent | None] | None = None
        self.leases = LeaseReuse(self._grant_lease)  # for writes with a TTL (Events)

    @property
    def endpoint(self) -> str:
        """The etcd member in use now."""
        return self.endpoints[self._index]

    def _new_client(self) -> aetcd.Client:
        host, _, port = self.endpoint.removeprefix("http://").removeprefix(
            "https://").rpartition(":")
        # gRPC's 4 MiB default would fail any range read or watch response past it (a few
        # large ConfigMaps, a few thousand pods), with TLS as without
        options = {"grpc.max_receive_message_length": _ETCD_MAX_MESSAGE,
                   "grpc.max_send_message_length": _ETCD_MAX_MESSAGE}
        if self._tls is not None:
            return TlsEtcdClient(tls=self._tls, host=host or "127.0.0.1", port=int(port),
                                 timeout=int(max(1, self._timeout)), options=options)
        return aetcd.Client(host=host or "127.0.0.1", port=int(port),
                            timeout=int(max(1, self._timeout)), options=options)

    def _failover(self, failed: aetcd.Client) -> None:
        """Move to the next etcd member after `failed` (if still in use) did not answer."""
        if len(self.endpoints) < 2 or failed is not self._client:
            return
        old = self.endpoint
        self._index = (self._index + 1) % len(self.endpoints)
        self._client = self._new_client()
        log.warning("etcd member unavailable; using the next one",
                    extra={"from": old, "to": self.endpoint})
        task = asyncio.get_running_loop().create_task(failed.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def connect(self) -> None:
        await self._retry(lambda: self._client.connect())

    async def close(self) -> None:
        await self._client.close()

    async def _retry(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run one etcd call, retrying transport failures with backoff for a bounded time
        (on the next member when there are several)."""
        # The first try runs bare: building tenacity's retry loop for every call cost ~5 %
        # of the apiserver's CPU in bench/scheduler_perf.py; the loop starts only once a
        # call has failed in a way worth retrying.
        client = self._client
        try:
            return await call_once(call)
        except aetcd.exceptions.ClientError as err:
            if not transient(err):
                raise
            if fails_over(err):
                self._failover(client)
        return await self._retry_loop(call)

    async def _retry_loop(self, call: Callable[[], Awaitable[T]]) -> T:
        try:
            async for attempt in tenacity.AsyncRetrying(
                retry=tenacity.retry_if_exception(transient),
                wait=tenacity.wait_exponential(multiplier=0.05, max=1.0),
                stop=tenacity.stop_after_delay(self._retry_seconds),
                reraise=True,
            ):
                with attempt:
                    client = self._client
                    try:
                        return await call_once(call)
                    except aetcd.exceptions.ClientError as err:
                        if fails_over(err):
                            self._failover(client)
                        raise
        except EtcdOverloaded:
            raise ApiError.too_many_requests(
                "etcd has more writes waiting to be applied than it accepts (etcdserver: "
                "too many requests); retry after a pause", 1) from None
        except aetcd.exceptions.ConnectionTimeoutError:
            raise ApiError(Reason.SERVICE_UNAVAILABLE, self._unavailable(
                f"did not answer within {self._timeout:g}s")) from None
        except aetcd.exceptions.ClientError as err:
            if not transient(err):
                raise
            raise ApiError(Reason.SERVICE_UNAVAILABLE,
                           self._unavailable(f"is unavailable ({err or 'no connection'})")
                           ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _unavailable(self, what: str) -> str:
        members = ", ".join(self.endpoints)
        return (f"etcd at {members} {what}: writes and consistent reads need a quorum "
                "(a majority of etcd members); retry later or use another apiserver")

    async def _range(self, key: str, *, prefix: bool, revision: int = 0,
                     count_only: bool = False, start: bytes = b"", limit: int = 0,
                     expired: str = EXPIRED_LIST) -> Any:
        k = key.encode()
        request = etcdrpc.RangeRequest(
            key=start or k,
            range_end=aetcd.utils.prefix_range_end(k) if prefix else b"",
            revision=revision,
            count_only=count_only,
            limit=limit,
        )

        async def call() -> Any:
            await self._client.connect()
            try:
                return await self._client.kvstub.Range(request, timeout=self._timeout)
            except etcdrpc.AioRpcError as err:
                if "compacted" in (err.details() or ""):
                    raise ApiError.gone(expired) from None
                if "future revision" in (err.details() or ""):
                    raise ApiError.bad_request(
                        f"revision {revision} is newer than the store's") from None
                aetcd.exceptions._handle_exception(err)
                raise

        return await self._retry(call)

    async def get(self, key: str, *, revision: int = 0) -> tuple[KeyValue | None, int]:
        resp = await self._range(key, prefix=False, revision=revision, expired=EXPIRED_GET)
        if not resp.kvs:
            return None, resp.header.revision
        kv = resp.kvs[0]
        return (KeyValue(key, decode_value(kv.value, kv.mod_revision), kv.mod_revision,
                         kv.create_revision), resp.header.revision)

    async def list(self, prefix: str, *, revision: int = 0
                   ) -> tuple[builtins.list[KeyValue], int]:
        """Every key under `prefix` at one revision, read in pages of `LIST_PAGE` keys so no
        etcd reply has to hold the whole range."""
        items: builtins.list[KeyValue] = []
        start, pinned = b"", revision
        while True:
            try:
                page = await self.list_page(prefix, revision=pinned, start=start,
                                            limit=LIST_PAGE)
            except ApiError as err:
                if err.reason != Reason.GONE or revision or not start:
                    raise
                # Compacted between two pages of a read of "now": read it again.
                items, start, pinned = [], b"", 0
                continue
            items.extend(page.items)
            pinned = page.revision
            if not page.more:
                return items, pinned
            start = page.next_key

    async def list_page(self, prefix: str, *, revision: int = 0, start: bytes = b"",
                        limit: int = 0) -> ListPage:
        """Up to `limit` keys under `prefix` from key `start` on (inclusive), at `revision`
        (0: the newest, which the page then pins)."""
        resp = await self._range(prefix, prefix=True, revision=revision, start=start,
                                 limit=limit)
        items = [
            KeyValue(kv.key.decode(), decode_value(kv.value, kv.mod_revision),
                     kv.mod_revision, kv.create_revision)
            for kv in resp.kvs
        ]
        more = bool(resp.more)
        next_key = resp.kvs[-1].key + b"\x00" if more and resp.kvs else b""
        return ListPage(items, int(revision or resp.header.revision), more, next_key,
                        max(0, int(resp.count) - len(items)))

    async def current_revision(self) -> int:
        resp = await self._range("/registry/", prefix=True, count_only=True)
        return int(resp.header.revision)

    async def quorum_revision(self, *, timeout: float) -> int:
        """etcd's revision by a linearizable read that must answer within `timeout` (the
        watch cache's currency check, `--etcd-readycheck-timeout`), so the check's verdict
        comes in bounded time whatever else the apiserver is doing. With several members
        the time is shared by two tries: a member that does not answer in its half is left
        for the next one (as a failed request leaves it), so one frozen member of a healthy
        quorum does not fail the check; a client another request's failover closed under
        the read is tried again at once."""
        # One key, not the registry's range: the header's revision is the store's either
        # way, and the check runs every few seconds whatever etcd holds.
        request = etcdrpc.RangeRequest(key=REGISTRY_PREFIX.encode(), count_only=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        tries = min(len(self.endpoints), 2)
        per_try = timeout / tries
        what = f"did not answer a quorum read within {timeout:g}s"
        closed = 0  # clients closed under the read by others (each retried once at most)
        while tries > 0 and closed <= len(self.endpoints) and (
                left := deadline - loop.time()) > 0:
            client = self._client
            limit = min(per_try, left)

            async def call(client: aetcd.Client = client, limit: float = limit) -> Any:
                await client.connect()
                return await client.kvstub.Range(request, timeout=limit)

            answers: list[str] = []  # what a live but leaderless member said
            try:
                async with asyncio.timeout(limit):  # not wait_for: see skiff.tasks
                    resp = await during_election(call, answers)
                return int(resp.header.revision)
            except ClientClosed:
                closed += 1
                continue  # another request moved to the next member: ask that one
            except (TimeoutError, etcdrpc.AioRpcError, aetcd.exceptions.ClientError,
                    OSError) as err:
                tries -= 1
                self._failover(client)
                if isinstance(err, etcdrpc.AioRpcError) and (
                        err.code() != grpc.StatusCode.DEADLINE_EXCEEDED):
                    what = f"is unavailable ({err.details() or 'no connection'})"
                elif isinstance(err, TimeoutError):  # (an OSError: test it first)
                    what = (f"is unavailable ({answers[-1]})" if answers else
                            f"did not answer a quorum read within {timeout:g}s")
                elif isinstance(err, aetcd.exceptions.ClientError | OSError):
                    what = f"is unavailable ({err or 'no connection'})"
        raise ApiError(Reason.SERVICE_UNAVAILABLE, self._unavailable(what))

    async def _txn(self, compare: builtins.list[Any],
                   success: builtins.list[Any]) -> tuple[bool, int]:
        epoch = leader_epoch.get()
        if epoch is None:
            return await self._txn_once(compare, success)
        lease_name = lease_key(epoch)
        lease_bytes = lease_name.encode()
        tx = self._client.transactions
        # First try: the Lease as the watch cache last saw it, when it names this term.
        # Only a suggestion: the txn's compare on its mod_revision makes the write fail if
        # the Lease has changed since, and a cached Lease naming another holder is never a
        # reason to refuse (the cache may lag), so both fall back to a fresh read.
        suggested = self._cached_epoch(epoch, lease_name)
        for _ in range(EPOCH_ATTEMPTS):
            if suggested is not None:
                lease_revision, suggested = suggested, None
            else:
                lease_revision = await self._check_epoch(epoch)
            ok, revision = await self._txn_once(
                [*compare, tx.mod(lease_bytes) == lease_revision], success)
            if ok:
                return ok, revision
            lease, _ = await self.get(lease_name)
            if lease is not None and lease.mod_revision == lease_revision:
                return ok, revision  # the object's own compare failed
            # The Lease changed in between (a renewal, or a new leader): check again.
        raise ApiError(Reason.CONFLICT,
                       f"{epoch.describe()} kept changing during the write; retry")

    def _cached_epoch(self, epoch: LeaderEpoch, key: str) -> int | None:
        """The cached Lease's mod_revision if it names `epoch`'s holder and term."""
        raw = self.recent(key) if self.recent is not None else None
        if raw is None or raw.obj is None or lease_term(raw.obj) != (epoch.holder,
                                                                       epoch.transitions):
            return None
        return raw.revision

    async def _check_epoch(self, epoch: LeaderEpoch) -> int:
        """The Lease's mod_revision if it still names this leader's term, else Conflict: a
        failed precondition, as a uid or resourceVersion precondition is (SPEC CP4)."""
        lease, _ = await self.get(lease_key(epoch))
        holder, transitions = lease_term(lease.obj if lease is not None else None)
        if lease is None or holder != epoch.holder or transitions != epoch.transitions:
            now = (f"held by {holder!r} with leaseTransitions {transitions}" if holder else
                   f"held by nobody (leaseTransitions {transitions})" if lease is not None
                   else "gone")
            raise LeaderFenced(
                Reason.CONFLICT,
                f"write refused by leader fencing: it carries the epoch of {epoch.describe()}, "
                f"but that Lease is now {now}; a deposed leader may not write")
        return lease.mod_revision

    async def _txn_once(self, compare: builtins.list[Any],
                        success: builtins.list[Any]) -> tuple[bool, int]:
        """One transaction, retried on transport failures. A compare that fails after an
        attempt whose outcome is unknown is `ambiguous_write_error` (see the module doc)."""
        uncertain = False  # an earlier attempt may have reached etcd

        async def call() -> tuple[bool, int]:
            nonlocal uncertain
            client, endpoint = self._client, self.endpoint
            await client.connect()
            request = etcdrpc.TxnRequest(
                compare=[c.build_message() for c in compare],
                success=client._ops_to_requests(success),
                failure=[],
            )
            try:
                resp = await client.kvstub.Txn(request, timeout=self._timeout)
            except etcdrpc.AioRpcError as err:
                if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    # The request may sit in a send buffer of a cut connection and reach
                    # etcd after the cut heals: an outcome nobody knows yet, answered as
                    # kube-apiserver answers one (504 Timeout), not retried (the compare
                    # makes a late duplicate fail harmlessly anyway).
                    self._failover(client)
                    log.warning("etcd transaction outcome unknown", extra={
                        "etcd": endpoint, "error": f"no answer within {self._timeout:g}s"})
                    raise ambiguous_write_error() from None
                if no_space(err):
                    raise no_space_error() from None
                if overloaded(err):
                    raise EtcdOverloaded(err.details()) from None  # refused: not written
                if "lease not found" in (err.details() or ""):
                    raise _LeaseNotFound() from None  # refused: not written
                # Unavailable and the like are transient, as in `_range`: retried, then
                # ServiceUnavailable, never an InternalError. The transaction may have
                # been committed before the connection broke.
                uncertain = True
                aetcd.exceptions._handle_exception(err)
                raise
            except asyncio.CancelledError:
                uncertain = True  # closed under the call (a failover), or cancelled
                raise
            return bool(resp.succeeded), int(resp.header.revision)

        ok, revision = await self._retry(call)
        if not ok and uncertain:
            # The compare failed, perhaps on this very write committed by an attempt that
            # got no answer: not a Conflict/AlreadyExists the client could trust.
            log.warning("etcd transaction outcome unknown after a retry",
                        extra={"etcd": self.endpoint, "revision": revision})
            raise ambiguous_write_error()
        return ok, revision

    async def create(self, key: str, obj: Obj, *, ttl: int = 0) -> Obj:
        """Put a new key; AlreadyExists if it is there. Returns the object with its rv."""
        tx = self._client.transactions
        ok, revision = await self._put([tx.create(key.encode()) == 0], key, obj, ttl)
        if not ok:
            raise ApiError(Reason.ALREADY_EXISTS, "already exists")
        return _with_rv(obj, revision)

    async def update(self, key: str, obj: Obj, *, expected_revision: int,
                     ttl: int = 0) -> Obj:
        """Compare-and-swap on mod_revision; Conflict when someone wrote in between."""
        tx = self._client.transactions
        ok, revision = await self._put([tx.mod(key.encode()) == expected_revision], key,
                                       obj, ttl)
        if not ok:
            raise ApiError(Reason.CONFLICT, "the object has been modified")
        return _with_rv(obj, revision)

    async def _put(self, compare: builtins.list[Any], key: str, obj: Obj,
                   ttl: int) -> tuple[bool, int]:
        """A put under `compare`; with `ttl` > 0 on a lease, so etcd deletes the key that
        long after this write (a lease etcd no longer has is replaced once)."""
        tx = self._client.transactions
        value = encode_value(obj)
        if ttl <= 0:
            return await self._txn(compare, [tx.put(key.encode(), value)])
        for _ in range(2):
            lease = await self.leases.lease(ttl)
            try:
                return await self._txn(compare, [tx.put(key.encode(), value, lease=lease)])
            except _LeaseNotFound:
                self.leases.forget(lease)
        raise ApiError(Reason.INTERNAL_ERROR, "etcd refused the object's expiry lease twice "
                                              "(requested lease not found); retry")

    async def _grant_lease(self, ttl: int) -> int:
        async def call() -> int:
            client = self._client
            await client.connect()
            try:
                resp = await client.leasestub.LeaseGrant(
                    etcdrpc.LeaseGrantRequest(TTL=ttl, ID=0), timeout=self._timeout)
            except etcdrpc.AioRpcError as err:
                if no_space(err):  # a lease is a write too: the same 500 as the put's
                    raise no_space_error() from None
                if overloaded(err):
                    raise EtcdOverloaded(err.details()) from None
                aetcd.exceptions._handle_exception(err)
                raise
            return int(resp.ID)

        return await self._retry(call)

    async def delete(self, key: str, *, expected_revision: int) -> int:
        """Delete if unchanged since `expected_revision`; returns the deletion revision."""
        tx = self._client.transactions
        ok, revision = await self._txn([tx.mod(key.encode()) == expected_revision],
                                       [tx.delete(key.encode())])
        if not ok:
            raise ApiError(Reason.CONFLICT, "the object has been modified")
        return revision

    async def compact(self, revision: int, *, physical: bool = True) -> None:
        """Drop every version older than `revision` from etcd's log (a revision already
        compacted is Gone)."""
        async def call() -> None:
            await self._client.connect()
            request = etcdrpc.CompactionRequest(revision=revision, physical=physical)
            try:
                await self._client.kvstub.Compact(request, timeout=self._timeout)
            except etcdrpc.AioRpcError as err:
                if "compacted" in (err.details() or ""):
                    raise ApiError.gone(f"revision {revision} is already compacted") from None
                aetcd.exceptions._handle_exception(err)
                raise

        await self._retry(call)

    async def compact_cas(self, *, expect_version: int, revision: int
                          ) -> tuple[bool, int, int, int]:
        """Claim this interval's compaction: put `revision` into `compact_rev_key` if the
        key's version is still `expect_version` (no other apiserver claimed it since).

        Returns (claimed, the key's version now, etcd's revision now, the revision the
        key holds). A put refused by the space quota is the NOSPACE Status."""
        tx = self._client.transactions
        compare = [tx.version(COMPACT_REV_KEY) == expect_version]

        async def call() -> tuple[bool, int, int, int]:
            client = self._client
            await client.connect()
            request = etcdrpc.TxnRequest(
                compare=[c.build_message() for c in compare],
                success=client._ops_to_requests(
                    [tx.put(COMPACT_REV_KEY, str(revision).encode())]),
                failure=client._ops_to_requests([tx.get(COMPACT_REV_KEY)]))
            try:
                resp = await client.kvstub.Txn(request, timeout=self._timeout)
            except etcdrpc.AioRpcError as err:
                if no_space(err):
                    raise no_space_error() from None
                if overloaded(err):
                    raise EtcdOverloaded(err.details()) from None
                aetcd.exceptions._handle_exception(err)
                raise
            head = int(resp.header.revision)
            if resp.succeeded:
                return True, expect_version + 1, head, revision
            kvs = resp.responses[0].response_range.kvs
            if not kvs:  # deleted by hand since: start counting again
                return False, 0, head, 0
            try:
                held = int(kvs[0].value.decode())
            except ValueError:
                held = 0
            return False, int(kvs[0].version), head, held

        return await self._retry(call)

    async def watch(self, prefix: str, *, start_revision: int) -> AsyncIterator[RawEvent]:
        """etcd events under `prefix` ("": every key) from `start_revision` (inclusive),
        with prev values.

        Raises ApiError(Gone) when that revision is compacted and lets transport errors
        (`aetcd.exceptions.ClientError`) through so the caller resumes from its last revision.
        """
        await self._client.connect()
        try:
            if prefix:
                watch = await self._client.watch_prefix(prefix.encode(),
                                                        start_revision=start_revision,
                                                        prev_kv=True)
            else:  # etcd's "from the smallest key to the end"
                watch = await self._client.watch(b"\0", range_end=b"\0",
                                                 start_revision=start_revision, prev_kv=True)
        except aetcd.exceptions.RevisionCompactedError:
            raise ApiError.gone(EXPIRED_WATCH) from None
        try:
            async for ev in watch:
                kv = ev.kv
                is_delete = ev.kind == aetcd.rtypes.EventKind.DELETE
                has_prev = ev.prev_kv is not None and bool(ev.prev_kv.value)
                yield RawEvent(
                    revision=kv.mod_revision,
                    key=kv.key.decode(),
                    type="DELETE" if is_delete else "PUT",
                    obj=None, prev=None,
                    created=(not is_delete and kv.create_revision == kv.mod_revision),
                    value=None if is_delete else kv.value,
                    prev_value=ev.prev_kv.value if has_prev else None,
                    prev_revision=ev.prev_kv.mod_revision if has_prev else 0,
                )
        except aetcd.exceptions.RevisionCompactedError:
            raise ApiError.gone(EXPIRED_WATCH) from None
        finally:
            try:
                await asyncio.shield(watch.cancel())
            except Exception:  # the stream may already be gone with the connection
                log.debug("etcd watch cancel failed", exc_info=True)

    async def history(self, key: str) -> builtins.list[KeyValue]:
        """Every version of one key still in etcd's log, oldest first (AS6).

        Walks back from the newest version with reads at `mod_revision - 1`, so it needs
        no watch and stops cleanly at the compaction point or the key's creation.
        """
        versions: builtins.list[KeyValue] = []
        current, head = await self.get(key)
        revision = head
        if current is None:
            # Deleted: find the last version before the deletion through the watch log.
            return await self._history_of_deleted(key, head)
        kv: KeyValue | None = current
        while kv is not None:
            versions.append(kv)
            if kv.mod_revision == kv.create_revision:
                break
            revision = kv.mod_revision - 1
            try:
                kv, _ = await self.get(key, revision=revision)
            except ApiError as err:
                if err.reason == Reason.GONE:
                    break
                raise
        versions.reverse()
        return versions

    async def _history_of_deleted(self, key: str, head: int) -> builtins.list[KeyValue]:
        """A deleted key's versions, from etcd's watch log: from revision 1, or from the
        compaction point once etcd has compacted (aetcd says so when the watch is made or
        with its first response)."""
        start = 1
        for _ in range(3):  # a compaction can land between two tries
            try:
                return await self._replay(key, start, head)
            except aetcd.exceptions.RevisionCompactedError as err:
                start = err.compacted_revision
        return []

    async def _replay(self, key: str, start: int, head: int) -> builtins.list[KeyValue]:
        versions: builtins.list[KeyValue] = []
        watch = await self._client.watch(key.encode(), start_revision=start)
        try:
            async def collect() -> None:
                async for ev in watch:
                    kv = ev.kv
                    if ev.kind == aetcd.rtypes.EventKind.DELETE:
                        versions.append(KeyValue(key, None, kv.mod_revision, 0))
                    else:
                        versions.append(KeyValue(key, decode_value(kv.value, kv.mod_revision),
                                                 kv.mod_revision, kv.create_revision))
                    if kv.mod_revision >= head:
                        return

            # Past events arrive at once; a short wait covers a key with no history left.
            async with asyncio.timeout(0.5):  # not wait_for: see skiff.tasks
                await collect()
        except TimeoutError:
            pass
        finally:
            await watch.cancel()
        return versions


class _LeaseNotFound(Exception):
    """etcd refused a put: its lease is gone (expired unused, or revoked)."""


def _with_rv(obj: Obj, revision: int) -> Obj:
    meta = dict(obj.get("metadata", {}))
    meta["resourceVersion"] = str(revision)
    return {**obj, "metadata": meta}
