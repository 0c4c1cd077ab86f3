"""The Docker engine as out-of-band access to compose nodes (docker mode of the agents).

In the compose cluster a node is a container and the engine is its BMC: the fence-agent
service gets the engine's socket mounted and talks to the Engine API over it — plain HTTP
with JSON, through the standard library (`http.client` on an AF_UNIX socket). There is no
`docker` command in Skiff's image, and none is needed: finding a node, killing and starting
it, inspecting whether it runs, and cutting it from its networks are each one API call.

A node is the container whose compose labels name the project and the service (the service
name is the node name), so compose v1 (`docker-compose`) and v2 (`docker compose`) both work.
The project is `--compose-project`, or, when that is empty, read from the labels of the
container this agent itself runs in (compose sets no COMPOSE_PROJECT_NAME inside containers,
and `-p NAME` is not visible to interpolation in compose v1).

`DockerEngine` is the only place that knows the API's paths and shapes; the agents see
`inspect_service`, `kill`, `start`, `networks`, `connect` and `disconnect`. Blocking socket
calls run in a worker thread, so the event loop never waits on the engine. Every failure is a
`FenceError` saying what failed, where, and what to do. `Transport` is the seam the unit
tests replace with an in-memory engine.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import re
import socket
import urllib.parse
from pathlib import Path
from typing import Any, Protocol

from skiff.api.types import Obj
from skiff.fence_agent.agent import FenceError

__all__ = ["DEFAULT_DOCKER_HOST", "DockerEngine", "Transport", "UnixSocketTransport",
           "resolve_docker_host"]


PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
# `docker compose run` containers carry the service label too; only the service's own count.
ONEOFF_LABEL = "com.docker.compose.oneoff"
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
# Where deploy/compose/dockerd.sh puts the socket of the private engine it starts, for an
# agent run on the host next to that engine.
PRIVATE_DOCKER_SOCKET = "/var/lib/skiff-docker/docker.sock"
# The container's own id, from the bind mounts the engine makes for /etc/hostname etc.
_OWN_ID = re.compile(r"/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)\b")


def resolve_docker_host(setting: str, environ: dict[str, str] | None = None) -> str:
    """`--docker-host`, else DOCKER_HOST, else the default socket, else dockerd.sh's one."""
    env = os.environ if environ is None else environ
    host = setting or env.get("DOCKER_HOST", "")
    if host:
        return host
    if not os.path.exists("/var/run/docker.sock") and os.path.exists(PRIVATE_DOCKER_SOCKET):
        return f"unix://{PRIVATE_DOCKER_SOCKET}"
    return DEFAULT_DOCKER_HOST


class Transport(Protocol):
    """One HTTP exchange with the engine: (status, decoded JSON body or None)."""

    host: str

    def request(self, method: str, path: str, body: Obj | None = None) -> tuple[int, Any]:
        ...


class _UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a unix socket: http.client with the connect step replaced."""

    def __init__(self, path: str, *, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class UnixSocketTransport:
    """The real engine at `unix:///path` (or `tcp://host:port` without TLS)."""

    def __init__(self, *, host: str, timeout: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(host if "://" in host else f"unix://{host}")
        if parsed.scheme == "unix":
            self.socket_path: str | None = parsed.path
        elif parsed.scheme == "tcp":
            self.socket_path = None
            self.netloc = parsed.netloc
        else:
            raise ValueError(f"docker host {host!r}: only unix:///path/docker.sock and "
                             "tcp://host:port (no TLS) are supported")
        self.host = host
        self.timeout = timeout

    def _connection(self) -> http.client.HTTPConnection:
        if self.socket_path is not None:
            return _UnixHTTPConnection(self.socket_path, timeout=self.timeout)
        return http.client.HTTPConnection(self.netloc, timeout=self.timeout)

    def request(self, method: str, path: str, body: Obj | None = None) -> tuple[int, Any]:
        conn = self._connection()
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        if not raw:
            return response.status, None
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, {"message": raw.decode(errors="replace").strip()}


class DockerEngine:
    """The compose project's containers and networks, through the Engine API."""

    def __init__(self, *, project: str = "", host: str = DEFAULT_DOCKER_HOST,
                 timeout: float = 30.0, transport: Transport | None = None) -> None:
        self._project = project
        self.transport: Transport = transport or UnixSocketTransport(host=host,
                                                                     timeout=timeout)

    # -- HTTP ------------------------------------------------------------------------------

    async def call(self, method: str, path: str, body: Obj | None = None, *,
                   ok: tuple[int, ...] = ()) -> Any:
        """One API call; a status >= 400 not listed in `ok` is a FenceError."""
        where = f"the Docker engine at {self.transport.host}"
        try:
            status, data = await asyncio.to_thread(self.transport.request, method, path, body)
        except (FileNotFoundError, ConnectionRefusedError) as err:
            raise FenceError(
                f"cannot reach {where} ({err.strerror or err}): the fence agent needs the "
                "engine's socket (compose: mount it, SKIFF_DOCKER_SOCKET on the host side; "
                "elsewhere: --docker-host)") from None
        except PermissionError:
            raise FenceError(f"no permission to use {where}: run the fence agent as root or "
                             "in the docker group") from None
        except TimeoutError:
            raise FenceError(f"{method} {_short(path)} to {where} did not answer in time; "
                             "check the engine (`docker info`)") from None
        except (OSError, http.client.HTTPException) as err:
            raise FenceError(f"{method} {_short(path)} to {where} failed: {err}") from None
        if status >= 400 and status not in ok:
            message = data.get("message") if isinstance(data, dict) else None
            raise FenceError(f"{where} refused {method} {_short(path)} ({status}): "
                             f"{message or 'no message'}")
        return data

    # -- the compose project ---------------------------------------------------------------

    async def project(self) -> str:
        """`--compose-project`, else the project of the container this agent runs in."""
        if not self._project:
            own = own_container_id()
            if own is None:
                raise FenceError("no --compose-project given and this fence agent is not in "
                                 "a container to read it from; pass --compose-project")
            container = await self.call("GET", f"/containers/{own}/json")
            label = ((container.get("Config") or {}).get("Labels") or {}).get(PROJECT_LABEL)
            if not label:
                raise FenceError(f"container {_name(container)} of this fence agent has no "
                                 f"{PROJECT_LABEL} label; pass --compose-project")
            self._project = str(label)
        return self._project

    async def inspect_service(self, service: str) -> Obj:
        """The inspect document (`GET /containers/{id}/json`) of a compose service."""
        project = await self.project()
        filters = {"label": [f"{PROJECT_LABEL}={project}", f"{SERVICE_LABEL}={service}"]}
        found: list[Obj] = await self.call("GET", "/containers/json?all=1&filters="
                                           + urllib.parse.quote(json.dumps(filters)))
        own = [c for c in found if (c.get("Labels") or {}).get(ONEOFF_LABEL) != "True"]
        if not own:
            raise FenceError(f"no container for node {service} in compose project {project}; "
                             "is the compose cluster up, and is --compose-project right?")
        container: Obj = await self.call("GET", f"/containers/{own[0]['Id']}/json",
                                         ok=(404,))
        if "Id" not in container:  # removed between the list and the inspect
            raise FenceError(f"the container of node {service} disappeared while inspecting "
                             "it; retrying")
        return container

    async def networks(self) -> list[str]:
        """Names of the project's networks (those compose created and labelled)."""
        project = await self.project()
        filters = {"label": [f"{PROJECT_LABEL}={project}"]}
        found: list[Obj] = await self.call("GET", "/networks?filters="
                                           + urllib.parse.quote(json.dumps(filters)))
        return sorted(str(n["Name"]) for n in found)

    # -- acting on a container -------------------------------------------------------------

    async def kill(self, container_id: str) -> None:
        """SIGKILL every process of the container. The engine marks it stopped by hand, so
        `restart: unless-stopped` does not bring it back (not even after an engine restart);
        a container that is not running is fine (409)."""
        await self.call("POST", f"/containers/{container_id}/kill", ok=(409,))

    async def start(self, container_id: str) -> None:
        """Start the container; one already running answers 304, which is fine."""
        await self.call("POST", f"/containers/{container_id}/start")

    async def disconnect(self, network: str, container_id: str) -> None:
        await self.call("POST", f"/networks/{urllib.parse.quote(network)}/disconnect",
                        {"Container": container_id, "Force": True})

    async def connect(self, network: str, container_id: str, *, alias: str) -> None:
        """Attach with the service name as alias, so the cluster finds the node by name."""
        await self.call("POST", f"/networks/{urllib.parse.quote(network)}/connect",
                        {"Container": container_id, "EndpointConfig": {"Aliases": [alias]}})

    @staticmethod
    def name(container: Obj) -> str:
        return _name(container)


def own_container_id(mountinfo: Path = Path("/proc/self/mountinfo")) -> str | None:
    """The id of the container this process runs in, from the engine's bind mounts."""
    try:
        match = _OWN_ID.search(mountinfo.read_text())
    except OSError:
        return None
    return match.group(1) if match else None


def _name(container: Obj) -> str:
    return str(container.get("Name", "")).lstrip("/")


def _short(path: str) -> str:
    return path.split("?", 1)[0]
