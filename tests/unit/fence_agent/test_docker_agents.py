"""Docker-mode fencing (SPEC FN2) through the Engine API: an in-memory engine behind the
`Transport` seam for the agents, and a real HTTP server on a unix socket for the transport."""

from __future__ import annotations

import http.server
import json
import shutil
import socketserver
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from skiff.api.types import Obj
from skiff.fence_agent.agent import FenceError
from skiff.fence_agent.docker import (
    DockerEngine,
    UnixSocketTransport,
    own_container_id,
    resolve_docker_host,
)
from skiff.fence_agent.network import DockerNetworkAgent
from skiff.fence_agent.power import DockerPowerAgent
from skiff.fence_agent.settings import parse_settings
from skiff.settings import SettingsError

PROJECT = "skiff"


@dataclass
class FakeEngine:
    """The part of the Engine API the agents use, over in-memory containers and networks."""

    host: str = "unix:///fake/docker.sock"
    dies: bool = True
    containers: dict[str, Obj] = field(default_factory=dict)
    networks: dict[str, Obj] = field(default_factory=dict)
    calls: list[tuple[str, str, Obj | None]] = field(default_factory=list)

    def add(self, service: str, *, project: str = PROJECT, oneoff: bool = False,
            running: bool = True, networks: tuple[str, ...] = ("skiff_cluster",)) -> str:
        cid = f"{project}-{service}-{len(self.containers)}".ljust(64, "0")
        self.containers[cid] = {
            "Id": cid, "Name": f"/{project}_{service}_1",
            "Labels": {"com.docker.compose.project": project,
                       "com.docker.compose.service": service,
                       "com.docker.compose.oneoff": str(oneoff)},
            "State": {"Running": running},
            "Networks": {n: {"Aliases": [service]} for n in networks}}
        for network in networks:
            self.networks.setdefault(network, {"com.docker.compose.project": project})
        return cid

    def actions(self) -> list[tuple[str, str, Obj | None]]:
        return [c for c in self.calls if c[0] == "POST"]

    def request(self, method: str, path: str, body: Obj | None = None) -> tuple[int, Any]:
        self.calls.append((method, path.split("?")[0], body))
        url = urllib.parse.urlsplit(path)
        parts = url.path.strip("/").split("/")
        query = urllib.parse.parse_qs(url.query)
        labels = json.loads(query["filters"][0])["label"] if "filters" in query else []
        if parts == ["containers", "json"]:
            return 200, [{"Id": c["Id"], "Labels": c["Labels"]}
                         for c in self.containers.values()
                         if all(_has(c["Labels"], lbl) for lbl in labels)]
        if parts == ["networks"]:
            return 200, [{"Name": n} for n, lbls in self.networks.items()
                         if all(_has(lbls, lbl) for lbl in labels)]
        if parts[0] == "containers":
            container = self.containers.get(parts[1])
            if container is None:
                return 404, {"message": f"No such container: {parts[1]}"}
            if parts[2] == "json":
                return 200, {"Id": container["Id"], "Name": container["Name"],
                             "Config": {"Labels": container["Labels"]},
                             "State": dict(container["State"]),
                             "NetworkSettings": {"Networks": dict(container["Networks"])}}
            if parts[2] == "kill":
                if not container["State"]["Running"]:
                    return 409, {"message": f"Container {parts[1]} is not running"}
                if self.dies:
                    container["State"]["Running"] = False
                return 204, None
            if parts[2] == "start":
                if container["State"]["Running"]:
                    return 304, None
                container["State"]["Running"] = True
                return 204, None
        if parts[0] == "networks" and body is not None:
            network, action = urllib.parse.unquote(parts[1]), parts[2]
            if network not in self.networks:
                return 404, {"message": f"network {network} not found"}
            container = self.containers[body["Container"]]
            if action == "disconnect":
                container["Networks"].pop(network, None)
            else:
                container["Networks"][network] = {
                    "Aliases": body["EndpointConfig"]["Aliases"]}
            return 200, None
        return 500, {"message": f"fake engine: no {method} {path}"}


def _has(labels: dict[str, str], selector: str) -> bool:
    key, _, value = selector.partition("=")
    return labels.get(key) == value


def engine_with_nodes(**kwargs: Any) -> tuple[FakeEngine, DockerEngine]:
    fake = FakeEngine(**kwargs)
    for node in ("node-1", "node-2"):
        fake.add(node)
    return fake, DockerEngine(project=PROJECT, transport=fake)


# -- power ---------------------------------------------------------------------------------

async def test_fn2_power_fence_kills_the_container_and_confirms_it_stopped() -> None:
    fake, docker = engine_with_nodes()
    node1 = next(c for c in fake.containers if "node-1" in c)
    agent = DockerPowerAgent(docker=docker, confirm_timeout=1)
    message = await agent.fence("node-1")
    assert fake.actions() == [("POST", f"/containers/{node1}/kill", None)]
    assert "the Docker engine confirms it is not running" in message
    assert (await agent.status("node-1")).fenced
    assert not (await agent.status("node-2")).fenced  # only the node named was touched
    await agent.fence("node-1")  # idempotent: already stopped, nothing killed again
    assert len(fake.actions()) == 1
    assert "started container skiff_node-1_1 again" == await agent.unfence("node-1")
    assert fake.actions()[-1] == ("POST", f"/containers/{node1}/start", None)
    assert not (await agent.status("node-1")).fenced
    await agent.unfence("node-1")  # idempotent: running already, not started twice
    assert len(fake.actions()) == 2


async def test_fn2_power_fence_fails_when_the_container_keeps_running() -> None:
    _fake, docker = engine_with_nodes(dies=False)
    agent = DockerPowerAgent(docker=docker, confirm_timeout=0.3)
    with pytest.raises(FenceError, match="is running after 0.3s"):
        await agent.fence("node-1")


async def test_the_node_is_the_project_service_container_not_a_one_off_or_another_project(
        ) -> None:
    fake = FakeEngine()
    fake.add("node-1", project="other")
    fake.add("node-1", oneoff=True)  # `docker compose run node-1 ...`
    mine = fake.add("node-1")
    docker = DockerEngine(project=PROJECT, transport=fake)
    assert (await docker.inspect_service("node-1"))["Id"] == mine
    with pytest.raises(FenceError, match="no container for node node-9 in compose project "
                                         "skiff; is the compose cluster up"):
        await docker.inspect_service("node-9")
    status = await DockerPowerAgent(docker=docker).status("node-9")
    assert not status.fenced and "no container for node node-9" in status.message


# -- network -------------------------------------------------------------------------------

async def test_fn2_network_fence_disconnects_every_network_and_unfence_keeps_the_alias(
        ) -> None:
    fake = FakeEngine()
    cid = fake.add("node-1", networks=("skiff_cluster", "skiff_storage"))
    fake.add("node-2")
    docker = DockerEngine(project=PROJECT, transport=fake)
    agent = DockerNetworkAgent(docker=docker)

    message = await agent.fence("node-1")
    assert message == "disconnected container skiff_node-1_1 from skiff_cluster, skiff_storage"
    assert fake.containers[cid]["Networks"] == {}
    assert (await agent.status("node-1")).fenced
    assert "already on no network" in await agent.fence("node-1")

    message = await agent.unfence("node-1")
    assert "reconnected container skiff_node-1_1 to skiff_cluster, skiff_storage" in message
    assert fake.containers[cid]["Networks"] == {
        "skiff_cluster": {"Aliases": ["node-1"]}, "skiff_storage": {"Aliases": ["node-1"]}}
    status = await agent.status("node-1")
    assert not status.fenced and "still on skiff_cluster, skiff_storage" in status.message


# -- the engine client ---------------------------------------------------------------------

async def test_engine_errors_say_what_failed_and_what_to_do() -> None:
    fake, docker = engine_with_nodes()
    with pytest.raises(FenceError, match=r"the Docker engine at unix:///fake/docker.sock "
                                         r"refused POST /networks/nope/connect \(404\): "
                                         "network nope not found"):
        await docker.connect("nope", next(iter(fake.containers)), alias="node-1")
    missing = DockerEngine(project=PROJECT, host="unix:///nonexistent/docker.sock")
    with pytest.raises(FenceError, match="cannot reach the Docker engine at "
                                         "unix:///nonexistent/docker.sock .*mount it"):
        await missing.inspect_service("node-1")


async def test_without_a_project_outside_a_container_it_asks_for_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("skiff.fence_agent.docker.own_container_id", lambda: None)
    docker = DockerEngine(transport=FakeEngine())
    with pytest.raises(FenceError, match="pass --compose-project"):
        await docker.project()


async def test_the_project_is_read_from_the_agents_own_container(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeEngine()
    own = fake.add("fence-agent", project="skiff-test-1234")
    monkeypatch.setattr("skiff.fence_agent.docker.own_container_id", lambda: own)
    assert await DockerEngine(transport=fake).project() == "skiff-test-1234"


def test_own_container_id_comes_from_the_engines_bind_mounts(tmp_path: Path) -> None:
    cid = "7462810" + "a" * 57
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "73 50 0:44 / / rw,relatime - overlay overlay rw\n"
        f"91 73 254:0 /var/lib/docker/containers/{cid}/hostname /etc/hostname rw - ext4\n")
    assert own_container_id(mountinfo) == cid
    mountinfo.write_text("73 50 0:44 / / rw,relatime - ext4 /dev/vda rw\n")
    assert own_container_id(mountinfo) is None
    assert own_container_id(tmp_path / "absent") is None


@pytest.mark.parametrize(("flag", "env", "expected"), [
    pytest.param("unix:///x.sock", {"DOCKER_HOST": "tcp://h:2375"}, "unix:///x.sock",
                 id="flag-wins"),
    pytest.param("", {"DOCKER_HOST": "tcp://h:2375"}, "tcp://h:2375", id="then-DOCKER_HOST"),
])
def test_docker_host_resolution(flag: str, env: dict[str, str], expected: str) -> None:
    assert resolve_docker_host(flag, env) == expected


def test_settings_reject_a_docker_host_the_agent_cannot_speak_to() -> None:
    with pytest.raises(SettingsError, match="--docker-host .*'ssh://me@box' is not"):
        parse_settings(["--mode", "docker", "--docker-host", "ssh://me@box"])
    assert parse_settings(["--mode", "docker"]).compose_project == ""


# -- the transport, against a real HTTP server on a unix socket ----------------------------

class _EngineHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._answer(200, [{"Id": "abc", "Labels": {}, "Path": self.path}])

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        if self.path.endswith("/kill"):
            self._answer(409, {"message": "container abc is not running"})
        elif self.path.endswith("/start"):
            self.send_response(304)
            self.end_headers()
        else:
            self._answer(500, {"message": f"got {body}"})

    def _answer(self, status: int, data: Any) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self) -> tuple[Any, Any]:
        request, _ = super().get_request()
        return request, ("local", 0)  # BaseHTTPRequestHandler wants a (host, port)


@pytest.fixture
def engine_socket() -> Iterator[str]:
    directory = tempfile.mkdtemp(prefix="eng", dir="/tmp")  # AF_UNIX paths are short
    path = f"{directory}/docker.sock"
    server = _UnixHTTPServer(path, _EngineHandler)
    thread = threading.Thread(target=server.serve_forever, name="fake-engine", daemon=True)
    thread.start()
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        shutil.rmtree(directory)


async def test_the_transport_speaks_http_over_the_unix_socket(engine_socket: str) -> None:
    docker = DockerEngine(project=PROJECT, host=f"unix://{engine_socket}", timeout=5)
    listed = await docker.call("GET", "/containers/json?all=1")
    assert listed == [{"Id": "abc", "Labels": {}, "Path": "/containers/json?all=1"}]
    await docker.kill("abc")  # 409 not running: already down is fine
    await docker.start("abc")  # 304 already started: fine
    with pytest.raises(FenceError, match=r"refused POST /networks/n/connect \(500\): got "
                                         r"\{'Container': 'abc'"):
        await docker.connect("n", "abc", alias="node-1")
    assert isinstance(docker.transport, UnixSocketTransport)
    assert docker.transport.socket_path == engine_socket
