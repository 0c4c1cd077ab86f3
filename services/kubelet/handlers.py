"""The four ways the kubelet checks or pokes a container: exec, httpGet, tcpSocket, grpc.

Probes (LC7) and lifecycle hooks (LC8, GT5) share these handlers; `sleep` is a hook-only
handler. A sandboxed pod (SPEC SB1) is reached at its pod IP from inside its network
namespace; without sandboxes its IP is 127.0.0.1 (processes share the node's network).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from skiff.api.types import ObjView
from skiff.kubelet.runtime import ContainerConfig, ContainerHandle, ContainerRuntime
from skiff.kubelet.sandbox import Sandbox

__all__ = ["POD_IP", "HandlerResult", "run_handler"]

POD_IP = "127.0.0.1"


@dataclass(frozen=True)
class HandlerResult:
    success: bool
    message: str = ""
    # an exec handler's own output: what a failed exec probe reports, as Kubernetes'
    # prober does ("Readiness probe failed: <output>"); the message says more for hooks
    output: str | None = None


def _port(value: Any, container: ObjView) -> int:
    if isinstance(value, int):
        return value
    text = str(value)
    if text.isdigit():
        return int(text)
    for port in container.get("ports") or []:
        if port.get("name") == text:
            return int(port["containerPort"])
    raise ValueError(f"port {text!r} is not a number nor a named port of the container")


async def _open(host: str, port: int, sandbox: Sandbox | None, *,
                ssl: ssl.SSLContext | None = None
                ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect as a real node would reach the pod: from inside its network namespace when
    it has a sandbox (SPEC SB1), else on the node's network."""
    if sandbox is None:
        return await asyncio.open_connection(host, port, ssl=ssl)
    sock = await asyncio.to_thread(sandbox.socket)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
    except BaseException:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock, ssl=ssl,
                                         server_hostname=host if ssl else None)


async def _http_get(spec: ObjView, container: ObjView, timeout: float,
                    sandbox: Sandbox | None = None) -> HandlerResult:
    host = spec.get("host") or (sandbox.ip if sandbox else POD_IP)
    port = _port(spec.get("port"), container)
    path = spec.get("path") or "/"
    tls = str(spec.get("scheme", "HTTP")).upper() == "HTTPS"
    context: ssl.SSLContext | None = None
    if tls:  # Kubernetes does not verify probe certificates
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    headers = "".join(f"{h['name']}: {h['value']}\r\n" for h in spec.get("httpHeaders") or [])
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.30\r\n"
               f"Accept: */*\r\nConnection: close\r\n{headers}\r\n").encode()

    async def go() -> HandlerResult:
        reader, writer = await _open(host, port, sandbox, ssl=context)
        try:
            writer.write(request)
            await writer.drain()
            status_line = await reader.readline()
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        parts = status_line.decode(errors="replace").split()
        if len(parts) < 2 or not parts[1].isdigit():
            return HandlerResult(False, f"bad HTTP response {status_line[:80]!r}")
        code = int(parts[1])
        if 200 <= code < 400:
            return HandlerResult(True, f"HTTP {code}")
        return HandlerResult(False, f"HTTP probe failed with statuscode: {code}")

    async with asyncio.timeout(timeout):  # not wait_for: see skiff.tasks
        return await go()


async def _tcp(spec: ObjView, container: ObjView, timeout: float,
               sandbox: Sandbox | None = None) -> HandlerResult:
    host = spec.get("host") or (sandbox.ip if sandbox else POD_IP)
    port = _port(spec.get("port"), container)
    async with asyncio.timeout(timeout):
        _, writer = await _open(host, port, sandbox)
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return HandlerResult(True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def _relay(host: str, port: int, sandbox: Sandbox) -> AsyncIterator[str]:
    """A loopback address that relays to `host:port` inside the pod's network namespace:
    gRPC makes its sockets on its own threads, which are in the node's namespace, so it
    dials this relay, whose far end is a socket made in the pod's namespace (SPEC SB1)."""
    tasks: set[asyncio.Task[Any]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            pod_reader, pod_writer = await _open(host, port, sandbox)
        except OSError:
            writer.close()
            return
        for task in (_pipe(reader, pod_writer), _pipe(pod_reader, writer)):
            tasks.add(asyncio.ensure_future(task))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _grpc(spec: ObjView, container: ObjView, timeout: float,
                sandbox: Sandbox | None = None) -> HandlerResult:
    port = _port(spec.get("port"), container)
    async with contextlib.AsyncExitStack() as stack:
        target = f"{POD_IP}:{port}"
        if sandbox is not None:
            target = await stack.enter_async_context(_relay(sandbox.ip, port, sandbox))
        channel = await stack.enter_async_context(grpc.aio.insecure_channel(target))
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            resp = await stub.Check(
                health_pb2.HealthCheckRequest(service=spec.get("service") or ""),
                timeout=timeout)
        except grpc.aio.AioRpcError as err:
            return HandlerResult(False, f"grpc health check failed: {err.code().name}")
    if resp.status == health_pb2.HealthCheckResponse.SERVING:
        return HandlerResult(True)
    return HandlerResult(False, f"service unhealthy (responded with "
                                f"{health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)})")


async def run_handler(handler: ObjView, *, container: ObjView, runtime: ContainerRuntime,
                      handle: ContainerHandle | None, config: ContainerConfig,
                      timeout: float) -> HandlerResult:
    """Run one probe or hook handler; errors and timeouts are failures, never exceptions."""
    try:
        if "exec" in handler:
            command = list((handler["exec"] or {}).get("command") or [])
            result = await runtime.exec(handle, config, command, timeout=timeout)
            if result.timed_out:
                return HandlerResult(False, f"command {command!r} timed out")
            if result.exit_code != 0:
                return HandlerResult(False, f"command {command!r} exited with "
                                            f"{result.exit_code}: {result.output[-200:]}",
                                     output=result.output[-200:])
            return HandlerResult(True, result.output[-200:])
        if "httpGet" in handler:
            return await _http_get(handler["httpGet"], container, timeout, config.sandbox)
        if "tcpSocket" in handler:
            return await _tcp(handler["tcpSocket"], container, timeout, config.sandbox)
        if "grpc" in handler:
            return await _grpc(handler["grpc"], container, timeout, config.sandbox)
        if "sleep" in handler:
            seconds = float((handler["sleep"] or {}).get("seconds", 0))
            await asyncio.sleep(min(seconds, timeout))
            return HandlerResult(True)
    except TimeoutError:
        return HandlerResult(False, f"timed out after {timeout:g}s")
    except (OSError, ValueError) as err:
        return HandlerResult(False, str(err))
    return HandlerResult(False, "no handler (need exec, httpGet, tcpSocket or grpc)")
