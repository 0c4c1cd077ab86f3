"""ServiceAccount admission (SPEC AX3), as Kubernetes' `ServiceAccount` admission plugin:
a pod without `serviceAccountName` gets `default`; a pod whose ServiceAccount does not exist
is refused (403); unless `automountServiceAccountToken` is false (on the pod, else on the
ServiceAccount) the pod gets the projected `kube-api-access-<suffix>` volume (a bound token,
`ca.crt` from the `kube-root-ca.crt` ConfigMap, the namespace) mounted read-only at
/var/run/secrets/kubernetes.io/serviceaccount in every container, which the kubelet fills
(`skiff.kubelet.projected`). Right after a namespace is created its `default` ServiceAccount may not
exist yet (the controller-manager makes it), so the `default` one is looked up a few times,
100–200 ms apart, before the pod is refused, as Kubernetes does.
"""

from __future__ import annotations

import asyncio
import random
import secrets
import string
from collections.abc import Awaitable, Callable

from skiff.api.errors import ApiError, Reason
from skiff.api.types import Obj
from skiff.api.wellknown import MIRROR_POD_ANNOTATION
from skiff.apiserver.admission.interface import Attributes, DefaultingPlugin

DEFAULT_SERVICE_ACCOUNT = "default"
DEFAULT_ATTEMPTS = 10
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_VOLUME_PREFIX = "kube-api-access-"
# Kubernetes' default: an hour plus a few seconds, so the kubelet's refresh is visible.
TOKEN_EXPIRATION_SECONDS = 3607

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
        account = await get(namespace, name)
        if account is not None:
            _mount_token(spec, account)
            return
    raise ApiError(Reason.FORBIDDEN,
                   f'pods "{meta.get("name", "")}" is forbidden: error looking up service '
                   f'account {namespace}/{name}: serviceaccount "{name}" not found')


def _mount_token(spec: Obj, account: Obj) -> None:
    automount = spec.get("automountServiceAccountToken")
    if automount is None:
        automount = account.get("automountServiceAccountToken")
    if automount is False:
        return
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    if any(m.get("mountPath") == TOKEN_MOUNT_PATH
           for c in containers for m in c.get("volumeMounts") or []):
        return  # the pod mounts something of its own there
    volumes: list[Obj] = spec.setdefault("volumes", [])
    taken = {v.get("name") for v in volumes}
    name = ""
    while not name or name in taken:
        name = TOKEN_VOLUME_PREFIX + "".join(
            secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    volumes.append({"name": name, "projected": {"defaultMode": 0o644, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS,
                                 "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}})
    for container in containers:
        container.setdefault("volumeMounts", []).append(
            {"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH})


class ServiceAccount(DefaultingPlugin):
    """Defaults and checks a created pod's ServiceAccount and mounts its token."""

    name = "ServiceAccount"
    kinds = frozenset({"Pod"})

    def __init__(self, get: GetServiceAccount) -> None:
        self.get = get

    async def admit_create(self, attrs: Attributes) -> None:
        await admit_service_account(attrs.obj, self.get)
