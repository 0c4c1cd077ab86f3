"""Who writes over gRPC, as a field manager (SPEC AX1, `metadata.managedFields`).

Kubernetes names the manager of a non-apply write after the client's user agent, up to its
first `/` (`kube-scheduler/v1.32.0 (linux/amd64) kubernetes/...` -> `kube-scheduler`), unless
the request names one (`fieldManager`). Skiff's components talk gRPC with their own user
agents (`skiff-kubelet`, ...); they are recorded under the names Kubernetes' components
have, so `kubectl apply --server-side` reports a conflict with "kubelet" or
"kube-controller-manager" where Kubernetes would. The gRPC front sets the manager of each
request in a context variable, read by the handlers that write.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

from skiff.apiserver.endpoints.handlers.fieldmanager.apply import default_manager

# Skiff's component user agents -> the manager names of Kubernetes' components.
KUBERNETES_NAMES = {"skiff-kubelet": "kubelet", "skiff-scheduler": "kube-scheduler",
                    "skiff-controller-manager": "kube-controller-manager"}

grpc_manager: ContextVar[str | None] = ContextVar("grpc_manager", default=None)


def from_user_agent(user_agent: str) -> str:
    """`skiff-kubelet grpc-python-asyncio/1.68 ...` -> `kubelet`."""
    product = user_agent.split(" ", 1)[0]
    name = default_manager(product)
    return KUBERNETES_NAMES.get(name, name)


def from_metadata(metadata: Iterable[tuple[str, Any]] | None) -> str:
    """The manager of a gRPC call, from its `user-agent` metadata."""
    for key, value in metadata or ():
        if key == "user-agent":
            return from_user_agent(value.decode() if isinstance(value, bytes) else str(value))
    return "unknown"


def current(options: dict[str, Any]) -> str:
    """The manager of the gRPC request being served: `options.fieldManager` or the caller's
    user agent."""
    named = options.get("fieldManager")
    if isinstance(named, str) and named:
        return named[:128]
    return grpc_manager.get() or "unknown"
