"""Finding a pod among the kubelets of one process.

One kubelet process may run several kubelets (the hollow nodes of the benchmarks), and its
logs, exec, attach and port-forward services each ask every kubelet in turn for the pod's
log, container or sandbox. The first that knows the pod answers; if none does, the last
kubelet's refusal (or a plain NotFound) is the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from skiff.api.errors import ApiError, Reason

T = TypeVar("T")


def first_located(locators: Iterable[Callable[..., T]], namespace: str, name: str,
                  *args: Any) -> T:
    last: ApiError | None = None
    for locator in locators:
        try:
            return locator(namespace, name, *args)
        except ApiError as err:
            last = err
    raise last or ApiError(Reason.NOT_FOUND,
                           f'pod "{name}" in namespace "{namespace}" is not on this node')
