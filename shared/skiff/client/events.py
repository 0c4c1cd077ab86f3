"""Recording Kubernetes Events (`kubectl describe` shows them; so does `skiff describe`).

Every component reports what it did to an object the way Kubernetes does: an Event in the
object's namespace with `involvedObject`, `reason`, `message`, `type` and `source`.
Repeats of the same (object, reason, message) within a short window bump `count` instead of
creating a new object. Recording never fails the caller: errors are logged.
"""

from __future__ import annotations

import logging
import uuid

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.client.interface import Client
from skiff.clock import Clock, RealClock, rfc3339, rfc3339_micro

log = logging.getLogger(__name__)


NORMAL = "Normal"
WARNING = "Warning"


class EventRecorder:
    def __init__(self, client: Client, *, component: str, host: str = "",
                 clock: Clock | None = None) -> None:
        self.client = client
        self.component = component
        self.host = host
        self.clock = clock or RealClock()
        self._recent: dict[tuple[str, str, str], Obj] = {}
        self._last_stamp = 0

    async def event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace") or "default"
        key = (str(meta.get("uid", "")), reason, message)
        now = self.clock.now()
        try:
            previous = self._recent.get(key)
            if previous is not None:
                previous["count"] = int(previous.get("count", 1)) + 1
                previous["lastTimestamp"] = rfc3339(now)
                try:
                    self._recent[key] = await self.client.update(previous)
                    return
                except ApiError:
                    self._recent.pop(key, None)
            # client-go's name, `<object>.<hex of the time in ns>`: one object's Events
            # list (and `kubectl describe` shows them) in the order they happened
            stamp = max(int(now * 1e9), self._last_stamp + 1)
            self._last_stamp = stamp
            event: Obj = {
                "apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{meta.get('name', 'object')}.{stamp:x}",
                             "namespace": namespace},
                "involvedObject": {
                    "kind": obj.get("kind", ""), "apiVersion": obj.get("apiVersion", ""),
                    "name": meta.get("name", ""), "namespace": meta.get("namespace", ""),
                    "uid": meta.get("uid", ""),
                    "resourceVersion": meta.get("resourceVersion", "")},
                "reason": reason, "message": message, "type": type_,
                "source": {"component": self.component, "host": self.host},
                "reportingComponent": self.component, "reportingInstance": self.host,
                "firstTimestamp": rfc3339(now), "lastTimestamp": rfc3339(now),
                "eventTime": rfc3339_micro(now), "count": 1,
            }
            try:
                self._recent[key] = await self.client.create(event)
            except ApiError as err:
                if err.reason != Reason.ALREADY_EXISTS:  # another process, same instant
                    raise
                event["metadata"]["name"] = f"{meta.get('name', 'object')}.{uuid.uuid4().hex[:16]}"
                self._recent[key] = await self.client.create(event)
            if len(self._recent) > 4096:
                self._recent.pop(next(iter(self._recent)))
        except ApiError as err:
            log.warning("could not record event", extra={"reason": reason,
                                                          "error": err.message})
