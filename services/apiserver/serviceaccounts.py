"""ServiceAccount admission (SPEC AX3), as Kubernetes' `ServiceAccount` admission plugin:
a pod without `serviceAccountName` gets `default`; a pod whose ServiceAccount does not exist
is refused (403). Right after a namespace is created its `default` ServiceAccount may not
exist yet (the controller-manager makes it), so the `default` one is looked up a few times,
100–200 ms apart, before the pod is refused, as Kubernetes does.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from skiff.api.errors import ApiError, Reason

Obj = dict[str, Any]

DEFAULT_SERVICE_ACCOUNT = "default"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
DEFAULT_ATTEMPTS = 10

GetServiceAccount = Callable[[str, str], Awaitable[Obj | None]]


async def admit_service_account(pod: Obj, get: GetServiceAccount, *,
                                attempts: int = DEFAULT_ATTEMPTS) -> None:
    meta = pod.setdefault("metadata", {})
    if MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}):
        return
    spec = pod.setdefault("spec", {})
    name = spec.get("serviceAccountName") or spec.get("serviceAccount") or \
        DEFAULT_SERVICE_ACCOUNT
    spec["serviceAccountName"] = name
    spec["serviceAccount"] = name  # the deprecated alias Kubernetes keeps in step
    namespace = meta.get("namespace") or "default"
    tries = attempts if name == DEFAULT_SERVICE_ACCOUNT else 1
    for attempt in range(tries):
        if attempt:
            await asyncio.sleep(random.uniform(0.1, 0.2))
        if await get(namespace, name) is not None:
            return
    raise ApiError(Reason.FORBIDDEN,
                   f'pods "{meta.get("name", "")}" is forbidden: error looking up service '
                   f'account {namespace}/{name}: serviceaccount "{name}" not found')
