"""Asking a kubelet to kill one container's processes (issue 35's crash-on-write
perturbation): `/skiff.v1.Kubelet/KillContainer` on the kubelet's own port, the apiserver
being the caller (its kubelet client certificate, as for logs and exec).

The kubelet SIGKILLs the container's process group and restarts it per the pod's
restartPolicy, exactly as after any crash. A msgpack request `{namespace, name,
container}` answers `{container, pid}`; errors carry an `ApiError`.
"""

from __future__ import annotations

import grpc

from skiff.api.errors import ApiError, Reason
from skiff.client.credentials import Credentials
from skiff.client.kubelet import kubelet_channel
from skiff.rpc.codec import decode_map, encode
from skiff.rpc.errors import from_grpc

SERVICE = "skiff.v1.Kubelet"
KILL_METHOD = f"/{SERVICE}/KillContainer"

__all__ = ["KILL_METHOD", "SERVICE", "kill_container"]


async def kill_container(target: str, *, namespace: str, name: str,
                         container: str | None = None,
                         credentials: Credentials | None = None) -> tuple[str, int]:
    """SIGKILL the container of pod namespace/name (its only app container when
    `container` is None) through the kubelet at `target`; (container, pid) killed."""
    async with kubelet_channel(target, credentials) as channel:
        call = channel.unary_unary(KILL_METHOD)
        try:
            data = await call(encode({"namespace": namespace, "name": name,
                                      "container": container}), timeout=10)
        except grpc.aio.AioRpcError as err:
            error = from_grpc(err, target=target)
            if error.reason == Reason.SERVICE_UNAVAILABLE:
                error = ApiError(Reason.SERVICE_UNAVAILABLE,
                                 f"the kubelet at {target} is unavailable ({err.details()})")
            raise error from None
    answer = decode_map(data)
    return str(answer.get("container") or ""), int(answer.get("pid") or 0)
