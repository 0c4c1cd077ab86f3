"""A Docker engine, Skiff's image built without pulling anything, and a compose project.

The engine: whatever answers already (left exactly as it was), else a private dockerd that
deploy/compose/dockerd.sh starts and, after the session, stops and cleans up after (docker0,
iptables chains, FORWARD policy). The image: a debootstrap base (cached by tag, and as a
tarball in /var/cache/skiff), Skiff from a wheelhouse built from this work tree. Nothing here
skips: a machine that cannot run Docker fails with what to install.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from skiff.client import ApiClient
from skiff.client.credentials import Credentials

REPO = Path(__file__).resolve().parents[3]
# In the run's temp root: "this run started the private engine" (tests/conftest.py's
# sessionfinish on the xdist controller stops it)
ENGINE_STARTED = "docker-engine-started"
COMPOSE_DIR = REPO / "deploy" / "compose"
BASE_IMAGE = os.environ.get("SKIFF_BASE_IMAGE", "skiff-base:bookworm")
TEST_IMAGE = "skiff:compose-test"
NEEDS = "apt-get install docker.io docker-compose debootstrap iptables"


def log(message: str) -> None:
    print(f"[compose {time.strftime('%H:%M:%S')}] {message}", flush=True)


def run(cmd: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = 300,
        check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure fail the test with its output, not a stack of pipes."""
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                              env=env, cwd=cwd, check=False)
    except FileNotFoundError:
        pytest.fail(f"{cmd[0]} not found; the compose test needs: {NEEDS}", pytrace=False)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"`{' '.join(cmd)}` did not finish in {timeout:.0f}s:\n{err.stdout!r}\n"
                    f"{err.stderr!r}", pytrace=False)
    if check and done.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` failed with exit code {done.returncode}:\n"
                    f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}", pytrace=False)
    return done


@dataclass(frozen=True)
class Engine:
    docker_host: str
    started_here: bool

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.docker_host, **extra}


def _remove_leftover_projects(host: str) -> None:
    """Test projects an interrupted run left in the private engine's data root. The
    engine restarts their `unless-stopped` containers when it starts again, and they
    would run (healthchecks every second, elections, heartbeats) beside this run's
    tests: once, three such projects held the load average above 50. No run can be using
    an engine that was not running, so everything named skiff-test-* is a leftover."""
    env = {**os.environ, "DOCKER_HOST": host}
    prefix = "name=skiff-test-"
    for kind, listing, remove in (
            ("container", ["ps", "-aq"], ["rm", "-f"]),
            ("network", ["network", "ls", "-q"], ["network", "rm"]),
            ("volume", ["volume", "ls", "-q"], ["volume", "rm", "-f"])):
        ids = run(["docker", *listing, "--filter", prefix], env=env).stdout.split()
        if ids:
            log(f"removing {len(ids)} leftover {kind}(s) of an interrupted run")
            run(["docker", *remove, *ids], env=env, timeout=120)


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    if shutil.which("docker") is None:
        pytest.fail(f"no docker command: the compose test needs a Docker engine; {NEEDS}",
                    pytrace=False)
    script = str(COMPOSE_DIR / "dockerd.sh")
    status = run([script, "status"]).stdout
    started_here = status.startswith("no engine")
    if started_here and os.geteuid() != 0:
        pytest.fail("no Docker engine runs and starting one needs root: run the tests as "
                    "root or start Docker (and set DOCKER_HOST)", pytrace=False)
    t0 = time.monotonic()
    host = run([script, "start"], timeout=120).stdout.strip().splitlines()[-1]
    log(f"engine {host} ({'started here' if started_here else 'already running'}) "
        f"in {time.monotonic() - t0:.1f}s")
    if started_here:
        _remove_leftover_projects(host)
    # Under pytest-xdist another worker may run compose tests on this engine after this
    # worker's session ends: the controller stops it once every worker is done
    # (tests/conftest.py); a serial run stops it here.
    shared = bool(os.environ.get("PYTEST_XDIST_WORKER"))
    if started_here and shared:
        (tmp_path_factory.getbasetemp().parent / ENGINE_STARTED).write_text(host)
    saved = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = host  # for skiff.cluster.chaos, as a user would export it
    try:
        yield Engine(docker_host=host, started_here=started_here)
    finally:
        if saved is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = saved
        if started_here and not shared:
            run([script, "stop"], timeout=120)
            assert_host_network_clean()


def assert_host_network_clean() -> None:
    """What a private dockerd leaves behind when it is not cleaned up."""
    links = run(["ip", "-o", "link", "show"]).stdout
    assert " docker0:" not in links, "docker0 is still there after dockerd.sh stop"
    for table in ("filter", "nat"):
        rules = run(["iptables", "-t", table, "-S"], check=False).stdout
        assert "DOCKER" not in rules, f"DOCKER chains left in iptables {table}:\n{rules}"


def compose_command(engine: Engine) -> list[str]:
    """`docker compose` (v2 plugin) where it exists, else Debian's `docker-compose` (v1)."""
    if run(["docker", "compose", "version"], env=engine.env(), check=False).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    pytest.fail(f"neither `docker compose` nor `docker-compose` is installed; {NEEDS}",
                pytrace=False)


@pytest.fixture(scope="session")
def skiff_image(docker_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Build TEST_IMAGE the offline way: debootstrap base, then Skiff from a wheelhouse."""
    env = docker_engine.env(PYTHON=sys.executable)
    t0 = time.monotonic()
    run([str(COMPOSE_DIR / "build-base-image.sh"), BASE_IMAGE], env=env, timeout=900)
    t1 = time.monotonic()
    log(f"base image {BASE_IMAGE} ready in {t1 - t0:.1f}s")
    context = tmp_path_factory.mktemp("image-context")
    shutil.copy(COMPOSE_DIR / "Dockerfile", context / "Dockerfile")
    shutil.copy(COMPOSE_DIR / "healthcheck.py", context / "healthcheck.py")
    run([str(COMPOSE_DIR / "build-wheelhouse.sh"), str(context / "wheelhouse")], env=env,
        timeout=600)
    t2 = time.monotonic()
    log(f"wheelhouse built in {t2 - t1:.1f}s")
    run(["docker", "build", "--quiet", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}",
         "-t", TEST_IMAGE, str(context)], env=env, timeout=600)
    log(f"image {TEST_IMAGE} built in {time.monotonic() - t2:.1f}s")
    return TEST_IMAGE


@dataclass
class ComposeProject:
    """One `docker compose -p NAME` project of deploy/compose/compose.yaml."""

    engine: Engine
    image: str
    name: str = field(default_factory=lambda: f"skiff-test-{uuid.uuid4().hex[:8]}")
    api_port: int = 0
    http_port: int = 0
    override: Path | None = None
    # The project's PKI (compose.yaml's `pki` service writes it): its own, never ./pki.
    pki_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="skiff-pki-")))

    def __post_init__(self) -> None:
        from skiff.cluster.processes import free_port

        self.api_port = self.api_port or free_port()
        self.http_port = self.http_port or free_port()  # not 8080: other projects may run
        self.command = compose_command(self.engine)

    def admin(self) -> Credentials:
        """The admin's files (system:masters) the `pki` service made for the host."""
        admin = self.pki_dir / "admin"
        return Credentials(ca_file=str(admin / "ca.crt"), cert_file=str(admin / "client.crt"),
                           key_file=str(admin / "client.key"))

    def use_admin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """This process (its ApiClients, and the skiff CLI it runs) talks as the admin over
        TLS, as a user who exported the admin's files would; undone after the test."""
        for key, value in self.admin().to_env().items():
            monkeypatch.setenv(key, value)

    def env(self) -> dict[str, str]:
        env = self.engine.env(SKIFF_IMAGE=self.image, SKIFF_API_PORT=str(self.api_port),
                              SKIFF_HTTP_PORT=str(self.http_port),
                              SKIFF_PKI_DIR=str(self.pki_dir),
                              # Checks every 3 s, and ten failures in a row (as the
                              # default's 3 x 10 s) before unhealthy: with 3 x 3 s, 9 s of
                              # an apiserver unable to confirm etcd's quorum under load
                              # failed `up` for every node (CI, HA profile).
                              SKIFF_HEALTH_INTERVAL="3s", SKIFF_HEALTH_RETRIES="10",
                              SKIFF_HEALTH_TIMEOUT="60s",
                              SKIFF_LOG_LEVEL="INFO")
        if self.engine.docker_host.startswith("unix://"):  # what the fence agent mounts
            env["SKIFF_DOCKER_SOCKET"] = self.engine.docker_host.removeprefix("unix://")
        env.pop("COMPOSE_PROFILES", None)
        env.pop("SKIFF_OTLP_ENDPOINT", None)
        return env

    def compose(self, *args: str, timeout: float = 300,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        files = ["-f", str(COMPOSE_DIR / "compose.yaml")]
        if self.override is not None:
            files += ["-f", str(self.override)]
        return run([*self.command, "-p", self.name, *files, *args], env=self.env(),
                   timeout=timeout, check=check, cwd=COMPOSE_DIR)

    def docker(self, *args: str, timeout: float = 120,
               check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(["docker", *args], env=self.engine.env(), timeout=timeout, check=check)

    def container(self, service: str) -> str:
        ids = self.docker("ps", "-q", "--filter", f"label=com.docker.compose.project={self.name}",
                          "--filter", f"label=com.docker.compose.service={service}").stdout
        assert ids.split(), f"no running container for {service} in {self.name}"
        return ids.split()[0]

    def running(self, service: str) -> bool:
        """Whether the service's container runs (it exists either way: found with -a)."""
        ids = self.docker("ps", "-aq", "--filter",
                          f"label=com.docker.compose.project={self.name}", "--filter",
                          f"label=com.docker.compose.service={service}").stdout.split()
        assert ids, f"no container at all for {service} in {self.name}"
        return self.docker("inspect", "-f", "{{.State.Running}}",
                           ids[0]).stdout.strip() == "true"

    def inspect(self, service: str) -> dict[str, Any]:
        found: list[dict[str, Any]] = json.loads(
            self.docker("inspect", self.container(service)).stdout)
        return found[0]

    def address(self, service: str) -> str:
        """The service's IP address on the project's network."""
        networks: dict[str, Any] = self.inspect(service)["NetworkSettings"]["Networks"]
        return str(next(iter(networks.values()))["IPAddress"])

    def health(self, service: str) -> str:
        fmt = "{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}"
        return self.docker("inspect", "-f", fmt, self.container(service)).stdout.strip()

    def wait_healthy(self, services: Sequence[str], *, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = {s: self.health(s) for s in services}
            if all(v == "healthy" for v in states.values()):
                return
            if time.monotonic() > deadline:
                logs = self.compose("logs", "--no-color", "--tail", "30", check=False).stdout
                pytest.fail(f"not healthy after {timeout:.0f}s: {states}\n{logs[-6000:]}",
                            pytrace=False)
            time.sleep(1)

    def can_connect(self, service: str, host: str, port: int, *, timeout: float = 3) -> bool:
        """Whether `service`'s container can open a TCP connection to host:port."""
        code = ("import socket, sys\n"
                f"socket.create_connection(({host!r}, {port}), timeout={timeout}).close()\n")
        done = self.docker("exec", self.container(service), "python3", "-c", code,
                           timeout=timeout + 30, check=False)
        return done.returncode == 0

    def logs_text(self, *, lines: int = 60, keep_in: Path | None = None) -> str:
        """The last `lines` log lines of every service, for a failed test's report (the
        containers and their logs are gone after `down`); with `keep_in` (a failed test's
        tmp_path: pytest keeps the last runs') every line also goes to
        `keep_in`/compose-logs.txt, which the text names, for what the tails leave out."""
        out = self.compose("logs", "--no-color", "--timestamps", check=False,
                           timeout=120).stdout
        by_service: dict[str, list[str]] = {}
        for line in out.splitlines():
            service, _, _ = line.partition(" | ")
            by_service.setdefault(service.strip(), []).append(line)
        text = "\n".join(f"----- {service}: last {lines} of {len(by_service[service])} "
                         f"lines\n" + "\n".join(by_service[service][-lines:])
                         for service in sorted(by_service))
        if keep_in is None:
            return text
        path = keep_in / "compose-logs.txt"
        path.write_text(out)
        return f"{text}\n----- every line: {path}"

    def print_logs(self, *, lines: int = 60, keep_in: Path | None = None) -> None:
        print(self.logs_text(lines=lines, keep_in=keep_in), flush=True)

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", "--timeout", "10", timeout=180)
        shutil.rmtree(self.pki_dir, ignore_errors=True)


async def wait_for(api: ApiClient, what: str, check: Any, *, timeout: float,
                   interval: float = 1.0) -> Any:
    """Poll `check(api)` until it returns something truthy; fail saying what never came."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check(api)
        if last:
            return last
        await asyncio.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})",
                pytrace=False)


async def node_csrs(api: ApiClient, signer: str) -> dict[str, list[dict[str, Any]]]:
    """The CSRs of `signer`, by the node each asks a certificate for (its request's CN)."""
    from cryptography.x509.oid import NameOID

    from skiff.api.groups import certificates as csrs

    found: dict[str, list[dict[str, Any]]] = {}
    for csr in (await api.list("certificatesigningrequests"))["items"]:
        if csr["spec"].get("signerName") != signer:
            continue
        request = csrs.parse_request(csrs.decode_bytes(csr["spec"]["request"]))
        cn = str(request.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)
        found.setdefault(cn.removeprefix("system:node:"), []).append(csr)
    return found


def node_condition(node: dict[str, Any], kind: str = "Ready") -> str:
    for condition in node.get("status", {}).get("conditions", []):
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return ""


def node_ready(node: dict[str, Any]) -> bool:
    return node_condition(node) == "True"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used `compose_project` reports its services' last log lines and
    keeps all of them in its tmp_path (`down` removes the containers and their logs right
    after; pytest keeps the last runs' tmp_path directories)."""
    report = yield
    funcargs = getattr(item, "funcargs", {})
    project = funcargs.get("compose_project")
    if report.when == "call" and report.failed and isinstance(project, ComposeProject):
        tmp_path = funcargs.get("tmp_path")
        report.sections.append(("compose logs", project.logs_text(
            keep_in=tmp_path if isinstance(tmp_path, Path) else None)))
    return report


def leftover_cgroups(container_ids: Sequence[str]) -> list[str]:
    """Cgroup directories of these containers still on the host (v1 and v2, cgroupfs and
    systemd drivers), where this process sees the engine's cgroups."""
    found: list[str] = []
    for cid in container_ids:
        for pattern in (f"*/docker/{cid}", f"docker/{cid}", f"*/system.slice/docker-{cid}.scope",
                        f"system.slice/docker-{cid}.scope"):
            found += [str(p) for p in Path("/sys/fs/cgroup").glob(pattern)]
    return found


@pytest.fixture
def compose_project(docker_engine: Engine, skiff_image: str, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> Iterator[ComposeProject]:
    project = ComposeProject(engine=docker_engine, image=skiff_image)
    project.use_admin(monkeypatch)
    try:
        yield project
    finally:
        ids = project.docker("ps", "-aq", "--no-trunc", "--filter",
                             f"label=com.docker.compose.project={project.name}").stdout.split()
        t0 = time.monotonic()
        project.down()
        # JN1: the node containers' pod cgroups, namespaces, bridges and routes lived in
        # the containers; nothing of them may stay on the host.
        assert not leftover_cgroups(ids), f"cgroups left after down: {leftover_cgroups(ids)}"
        log(f"compose down in {time.monotonic() - t0:.1f}s")
        label = f"label=com.docker.compose.project={project.name}"
        for kind in ("network", "volume"):
            left = project.docker(kind, "ls", "-q", "--filter", label).stdout.split()
            assert not left, f"{kind}s of {project.name} left after compose down: {left}"
        left = project.docker("ps", "-aq", "--filter", label).stdout.split()
        assert not left, f"containers of {project.name} left after compose down: {left}"
