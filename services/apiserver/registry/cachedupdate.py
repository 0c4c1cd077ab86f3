"""An update's start from the watch cache instead of an etcd read (issue 37).

Kubernetes' GuaranteedUpdate begins from the watch cache's object when it has one and reads
etcd only when the compare-and-swap on its revision loses. Skiff's updates read etcd first;
for an update that names the revision it last saw (Lease renewals, a kubelet's status
updates, which are most of a large cluster's writes) and that revision is the cache's newest
for the key, the read is redundant: the swap checks that same revision in etcd anyway.
"""

from __future__ import annotations

from skiff.api.objcopy import deep_copy
from skiff.apiserver.storage.values import KeyValue
from skiff.apiserver.storage.watchcache import WatchCache

# The create revision of a KeyValue taken from the cache (etcd's are all positive): an
# update that loses its swap from this start reads etcd before it answers Conflict.
FROM_CACHE = 0


def cached_kv(cache: WatchCache, key: str, revision: str, *,
              first: list[bool]) -> KeyValue | None:
    """A private copy of the cache's newest object at `key` when it is at `revision` (and
    this is the update's first attempt: `first` is cleared), else None."""
    if not first[0]:
        return None
    first[0] = False
    raw = cache.recent(key) if revision else None
    if raw is None or raw.obj is None or str(raw.revision) != revision:
        return None
    return KeyValue(key, deep_copy(raw.obj), raw.revision, FROM_CACHE)
