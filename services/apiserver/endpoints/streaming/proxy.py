"""pods/exec on the HTTP front (SPEC SB4): kubectl's and the client libraries' WebSocket
protocol, relayed to the kubelet that runs the pod.

kubectl 1.32 (client-go `remotecommand`, WebSocket first) asks for `v5.channel.k8s.io`; the
official Python client's `stream()` for `v4.channel.k8s.io`. Every frame is binary (text
frames are accepted from clients that send them) and starts with its channel byte: 0 stdin,
1 stdout, 2 stderr, 3 error (the final `Status`, with the exit code as kubectl reports it),
4 resize (`{"Width", "Height"}`); v5 adds 255 = close, naming the stream that ended (stdin).
The kubelet is asked first, so a refusal (container not running) is an HTTP error before
the upgrade, as Kubernetes' "unable to upgrade connection" is.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import grpc
from aiohttp import WSMsgType, web

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.apiserver.auth.context import current_user
from skiff.apiserver.endpoints.guard import RequestGuard
from skiff.apiserver.endpoints.handlers.queryparams import query_bool
from skiff.apiserver.endpoints.http import impersonation_headers, peer_certificate
from skiff.apiserver.endpoints.streaming.portforward import (
    SPDY_TUNNEL,
    forward_over_websocket,
    parse_ports,
)
from skiff.auth import Attributes
from skiff.client.credentials import Credentials
from skiff.client.kubelet import kubelet_channel
from skiff.client.logs import kubelet_endpoint
from skiff.client.streaming import exec_call
from skiff.rpc.codec import decode_map, encode
from skiff.rpc.errors import from_grpc

__all__ = ["PROTOCOLS", "PodStreams"]

log = logging.getLogger(__name__)

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io",
             "v2.channel.k8s.io", "channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255


def exit_status(code: int) -> Obj:
    """The error channel's last word: Success, or NonZeroExitCode with the code as cause."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing "
                       f"command, exit status {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


def _status_response(err: ApiError) -> web.Response:
    return web.Response(status=err.code, body=json.dumps(err.to_status()).encode(),
                        content_type="application/json")


class PodStreams:
    """`register(app)` adds the pods/exec route in front of the catch-all router."""

    def __init__(self, registry: Any, *, guard: RequestGuard | None = None,
                 kubelet: Credentials | None = None) -> None:
        self.registry = registry
        self.guard = guard  # None: the insecure mode
        self.kubelet = kubelet or Credentials()  # to the kubelets' own port

    async def _authorize(self, raw: web.Request, namespace: str, name: str, sub: str) -> None:
        """These routes bypass the REST handler, so they authenticate and authorize here:
        `create` on pods/exec (attach, portforward), as kube-apiserver asks RBAC."""
        if self.guard is None:
            return
        user = await self.guard.http_user_of(peer_certificate(raw),
                                             raw.headers.get("Authorization", ""))
        asked = impersonation_headers(raw)
        if asked:  # kubectl exec --as=...
            user = await self.guard.http_impersonate(user, asked)
        current_user.set(user)
        await self.guard.authorizer.check(Attributes(
            user=user, verb="create", resource="pods", subresource=sub, namespace=namespace,
            name=name))

    def register(self, app: web.Application) -> None:
        path = "/api/v1/namespaces/{namespace}/pods/{name}/{sub:exec|attach|portforward}"
        app.router.add_route("GET", path, self.handle)
        app.router.add_route("POST", path, self.handle)

    async def _kubelet_target(self, pod: Obj) -> str:
        node_name = pod.get("spec", {}).get("nodeName")
        if not node_name:
            raise ApiError.bad_request(f'pod {pod["metadata"]["name"]} is not scheduled to '
                                       "a node yet")
        return kubelet_endpoint(await self.registry.get("nodes", None, node_name))

    async def handle(self, raw: web.Request) -> web.StreamResponse:
        namespace, name = raw.match_info["namespace"], raw.match_info["name"]
        sub = raw.match_info["sub"]
        try:
            await self._authorize(raw, namespace, name, sub)
            if sub == "portforward":
                return await self._portforward(raw, namespace, name)
            pod = await self.registry.get("pods", namespace, name)
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                verb = "exec into" if sub == "exec" else "attach to"
                raise ApiError.bad_request(f"cannot {verb} a container in a completed "
                                           f"pod; current phase is "
                                           f"{pod['status']['phase']}")
            target = await self._kubelet_target(pod)
        except ApiError as err:
            return _status_response(err)
        websocket = raw.headers.get("Upgrade", "").lower() == "websocket"
        q = raw.query
        request = {"namespace": namespace, "name": name,
                   "container": q.get("container") or None,
                   "command": q.getall("command", []), "attach": sub == "attach",
                   "stdin": query_bool(q, "stdin"), "tty": query_bool(q, "tty"),
                   # a SPDY request (kubectl's fallback) only learns what is wrong
                   "check": not websocket}
        async with kubelet_channel(target, self.kubelet) as channel:
            call = exec_call(channel)
            try:
                await call.write(encode(request))
                first = decode_map(await call.read())
            except grpc.aio.AioRpcError as err:
                error = from_grpc(err, target=target)
                message = error.message
                if error.reason == Reason.SERVICE_UNAVAILABLE:
                    message = (f"the kubelet at {target} is unavailable ({err.details()}); "
                               "is the node's kubelet running?")
                return _status_response(ApiError(
                    error.reason, f"unable to upgrade connection: {message}"))
            if not websocket:
                return _status_response(ApiError.bad_request(
                    "pods/exec needs a WebSocket upgrade (channel.k8s.io); SPDY is not "
                    "served: use kubectl 1.30 or newer, or the client's stream()"))
            if not first.get("started"):
                return _status_response(ApiError(Reason.INTERNAL_ERROR,
                                                 "the kubelet did not start the command"))
            ws = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True)
            await ws.prepare(raw)
            try:
                await self._relay(ws, call, stdout=query_bool(q, "stdout"),
                                  stderr=query_bool(q, "stderr"))
            finally:
                call.cancel()
                await ws.close()
            return ws

    async def _portforward(self, raw: web.Request, namespace: str,
                           name: str) -> web.StreamResponse:
        """SB4: pods/portforward (see skiff.apiserver.endpoints.streaming.portforward)."""
        pod = await self.registry.get("pods", namespace, name)
        if pod.get("status", {}).get("phase") != "Running":
            raise ApiError.bad_request("unable to forward port because pod is not running. "
                                       f"Current status={pod.get('status', {}).get('phase')}")
        target = await self._kubelet_target(pod)
        if raw.headers.get("Upgrade", "").lower() != "websocket":
            raise ApiError.bad_request(
                "pods/portforward needs a WebSocket upgrade (SPDY/3.1+portforward.k8s.io or "
                "v4.channel.k8s.io); a plain SPDY upgrade is not served: use kubectl 1.31 "
                "or newer, or the client's portforward()")
        offered = [p.strip() for p in
                   raw.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        if SPDY_TUNNEL not in offered and not parse_ports(raw.query.getall("ports", [])):
            raise ApiError.bad_request("query parameter \"ports\" is required: the ports "
                                       "to forward, e.g. ?ports=8080")
        return await forward_over_websocket(raw, target, namespace, name, self.kubelet)

    async def _relay(self, ws: web.WebSocketResponse, call: Any, *, stdout: bool,
                     stderr: bool) -> None:
        async def from_client() -> None:
            async for msg in ws:
                if msg.type == WSMsgType.BINARY:
                    data = bytes(msg.data)
                elif msg.type == WSMsgType.TEXT:
                    data = str(msg.data).encode()
                else:
                    break
                if not data:
                    continue
                channel, payload = data[0], data[1:]
                if channel == STDIN and payload:
                    await call.write(encode({"stdin": payload}))
                elif channel == RESIZE:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        size = json.loads(payload)
                        await call.write(encode({"resize": [int(size["Width"]),
                                                            int(size["Height"])]}))
                elif channel == CLOSE and payload[:1] == bytes([STDIN]):
                    await call.write(encode({"stdinClose": True}))
            # the client went away (or closed): stdin ends with it
            with contextlib.suppress(Exception):
                await call.write(encode({"stdinClose": True}))

        reader = asyncio.create_task(from_client())
        code = 0
        try:
            while True:
                try:
                    data = await call.read()
                except grpc.aio.AioRpcError as err:
                    error = from_grpc(err)
                    await ws.send_bytes(bytes([ERROR]) + json.dumps(error.to_status()).encode())
                    return
                if data is grpc.aio.EOF:
                    break
                msg = decode_map(data)
                if "exit" in msg:
                    code = int(msg["exit"])
                    break
                stream = int(msg.get("stream", STDOUT))
                if (stream == STDOUT and stdout) or (stream == STDERR and stderr):
                    await ws.send_bytes(bytes([stream]) + bytes(msg["data"]))
            await ws.send_bytes(bytes([ERROR]) + json.dumps(exit_status(code)).encode())
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
