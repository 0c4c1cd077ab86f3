"""`/skiff.v1.Kubelet/KillContainer`: SIGKILL one running container's process group, for
the apiserver's crash-on-write perturbation (issue 35). The container's worker sees it
exit (code 137) and restarts it per the pod's restartPolicy, as after any crash; nothing
marks it as the kubelet's own kill, so its status reads like a real crash.

Served on the kubelet's own port beside logs and exec, behind the same caller check (the
apiserver's kubelet client identity or system:masters). The client side is
`skiff.client.kubeletkill`.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from typing import Any

import grpc

from skiff.api.errors import ApiError
from skiff.client.kubeletkill import SERVICE
from skiff.kubelet.locate import first_located
from skiff.kubelet.runtime import ContainerHandle
from skiff.rpc.codec import CodecError, decode_map, encode
from skiff.rpc.errors import to_grpc

__all__ = ["KillService"]

log = logging.getLogger(__name__)

# (namespace, name, container | None) -> (the container's config, its handle)
AttachLocator = Callable[[str, str, str | None], tuple[Any, ContainerHandle]]


class KillService:
    """Register `handler()`; `locators()`: the kubelets' attach_target, once they run
    (the exec service's list, shared)."""

    def __init__(self, locators: Callable[[], list[AttachLocator]]) -> None:
        self.locators = locators

    async def _kill(self, request: bytes, context: grpc.aio.ServicerContext[Any, Any]
                    ) -> bytes:
        try:
            try:
                req = decode_map(request)
            except CodecError:
                raise ApiError.bad_request("KillContainer: the request must be a map") \
                    from None
            namespace, name = str(req.get("namespace") or "default"), str(req.get("name"))
            config, handle = first_located(self.locators(), namespace, name,
                                           req.get("container") or None)
            try:
                os.killpg(handle.pgid, signal.SIGKILL)
            except ProcessLookupError:
                raise ApiError.bad_request(
                    f'container not found ("{config.name}")') from None
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
            raise AssertionError("unreachable") from None
        log.warning("container killed for a perturbation", extra={
            "pod": f"{namespace}/{name}", "container": config.name, "pid": handle.pid})
        return encode({"container": config.name, "pid": handle.pid})

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            "KillContainer": grpc.unary_unary_rpc_method_handler(self._kill)})
