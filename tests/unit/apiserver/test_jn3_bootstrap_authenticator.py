"""SPEC JN3: the apiserver's bootstrap token authenticator — who a `<id>.<secret>` bearer
token is, and every Secret that makes it nobody (a 401), read live and from the watch-fed
copy of kube-system."""

from __future__ import annotations

import asyncio
import base64
import time

import pytest

from skiff.api import lookup
from skiff.api.kinds import storage_key
from skiff.api.types import Obj
from skiff.apiserver.auth.bootstraptoken import BootstrapTokens
from skiff.apiserver.storage.memory import MemoryStorage
from skiff.apiserver.storage.values import KeyValue
from skiff.apiserver.storage.watchcache import WatchCache
from skiff.clock import rfc3339

TOKEN = "abcdef.0123456789abcdef"


def _secret(*, name: str = "bootstrap-token-abcdef", type_: str = "bootstrap.kubernetes.io/token",
            **data: str) -> Obj:
    values = {"token-id": "abcdef", "token-secret": "0123456789abcdef",
              "usage-bootstrap-authentication": "true", **data}
    return {"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": name, "namespace": "kube-system", "uid": "u1"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in values.items()
                     if v != "-"}}


async def _store(secret: Obj) -> tuple[MemoryStorage, BootstrapTokens]:
    store = MemoryStorage()
    await store.create(storage_key(lookup("secrets"), "kube-system",
                                   secret["metadata"]["name"]), secret)
    return store, BootstrapTokens(store, WatchCache(store))


async def test_jn3_token_is_the_bootstrap_user_in_its_groups() -> None:
    _, tokens = await _store(_secret(**{"auth-extra-groups": "system:bootstrappers:x"}))
    user = await tokens.authenticate(TOKEN)
    assert user is not None
    assert (user.name, user.groups) == ("system:bootstrap:abcdef", (
        "system:bootstrappers", "system:bootstrappers:x", "system:authenticated"))


@pytest.mark.parametrize(("token", "secret"), [
    pytest.param("abcdef.0123456789abcdee", _secret(), id="wrong-secret"),
    pytest.param("zzzzzz.0123456789abcdef", _secret(), id="no-such-secret"),
    pytest.param("ABCDEF.0123456789abcdef", _secret(), id="malformed"),
    pytest.param(TOKEN, _secret(expiration=rfc3339(time.time() - 5)), id="expired"),
    pytest.param(TOKEN, _secret(expiration="next week"), id="unparsable-expiration"),
    pytest.param(TOKEN, _secret(**{"usage-bootstrap-authentication": "-"}), id="no-usage"),
    pytest.param(TOKEN, _secret(**{"usage-bootstrap-authentication": "yes"}),
                 id="usage-not-true"),
    pytest.param(TOKEN, _secret(type_="Opaque"), id="not-a-token-secret"),
    pytest.param(TOKEN, _secret(**{"token-id": "zzzzzz"}), id="other-id-inside"),
    pytest.param(TOKEN, _secret(**{"auth-extra-groups": "system:masters"}),
                 id="invalid-group"),
])
async def test_jn3_token_refused(token: str, secret: Obj) -> None:
    _, tokens = await _store(secret)
    assert await tokens.authenticate(token) is None


async def test_jn3_unexpired_token_is_accepted() -> None:
    _, tokens = await _store(_secret(expiration=rfc3339(time.time() + 60)))
    assert await tokens.authenticate(TOKEN) is not None


async def test_jn3_token_being_deleted_is_refused() -> None:
    secret = _secret()
    secret["metadata"]["deletionTimestamp"] = rfc3339(time.time())
    _, tokens = await _store(secret)
    assert await tokens.authenticate(TOKEN) is None


async def test_jn3_secrets_are_read_from_the_watch_fed_copy() -> None:
    store, _ = await _store(_secret())
    cache = WatchCache(store)
    tokens = BootstrapTokens(store, cache)
    cache_task = asyncio.create_task(cache.run())
    copy_task = asyncio.create_task(tokens.run())
    live_reads = 0
    real_get = store.get

    async def counting_get(key: str, *, revision: int = 0) -> tuple[KeyValue | None, int]:
        nonlocal live_reads
        live_reads += 1
        return await real_get(key, revision=revision)

    try:
        await cache.ready()
        for _ in range(100):
            if tokens.synced:
                break
            await asyncio.sleep(0.02)
        store.get = counting_get  # type: ignore[method-assign]
        assert await tokens.authenticate(TOKEN) is not None
        assert live_reads == 0
        key = storage_key(lookup("secrets"), "kube-system", "bootstrap-token-abcdef")
        kv, _ = await real_get(key)
        assert kv is not None
        await store.update(key, _secret(**{"usage-bootstrap-authentication": "false"}),
                           expected_revision=kv.mod_revision)
        for _ in range(100):
            if await tokens.authenticate(TOKEN) is None:
                break
            await asyncio.sleep(0.02)
        assert await tokens.authenticate(TOKEN) is None
        assert live_reads == 0
    finally:
        for task in (copy_task, cache_task):
            task.cancel()
        await asyncio.gather(copy_task, cache_task, return_exceptions=True)
