"""Partitions of the compose cluster: `skiff chaos partition|heal` with Docker.

The compose cluster (deploy/compose) puts every component in its own container on one
Docker network. Containers are found by the labels compose gives them
(`com.docker.compose.project`, `com.docker.compose.service`), so this works with compose v1
(`docker-compose`) and v2 (`docker compose`) alike, through the `docker` command only.

Two kinds of cut:

* `partition(node)` cuts the node from everything: `docker network disconnect` from every
  network of the project, which removes its interface, so every connection dies at once and
  new ones fail. `heal` reconnects it with `docker network connect --alias <service>`, so the
  other components find it again by its service name.
* `partition(node, from_component=C)` cuts the node from C only. Docker has no per-pair
  links on one network, and the alternatives are worse: a network per pair of components
  changes addresses and DNS for everybody and grows quadratically; `nsenter -t <pid> -n
  iptables` on the host needs root, host iptables and an engine on the same kernel (not
  Docker Desktop). Instead a short-lived helper container from the node's own image joins
  the node's network namespace (`docker run --network container:<node> --cap-add NET_ADMIN`)
  and adds a `SKIFF-CHAOS` chain to it that DROPs packets to and from C's addresses, jumped
  to from INPUT and OUTPUT. The node keeps no extra capability, works with any engine the
  `docker` command reaches, and established connections stall like on a real cut (DROP, not
  REJECT). `heal` removes that chain. The cut is by C's addresses at the time it is made: if
  C is recreated with a new address, partition again.

Errors are `ChaosError` with one line saying what is wrong and what to do.
`DockerPartitions` is this cluster kind's side of the partition seam (`partitions`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

__all__ = ["ChaosError", "DockerPartitions", "heal", "partition"]

CHAIN = "SKIFF-CHAOS"
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
# `docker compose run` containers carry the service label too; only the service's own count.
NOT_ONE_OFF = "label=com.docker.compose.oneoff=False"
DOCKER_TIMEOUT_SECONDS = 60.0
# Where deploy/compose/dockerd.sh puts the socket of the private engine it starts.
PRIVATE_DOCKER_SOCKET = "/var/lib/skiff-docker/docker.sock"

_NEED_IPTABLES = """
command -v iptables >/dev/null 2>&1 || {
  echo "the image has no iptables: rebuild it from deploy/compose/Dockerfile" >&2; exit 3; }
"""

_CUT_SCRIPT = _NEED_IPTABLES + f"""
set -e
iptables -N {CHAIN} 2>/dev/null || true
iptables -C INPUT -j {CHAIN} 2>/dev/null || iptables -I INPUT -j {CHAIN}
iptables -C OUTPUT -j {CHAIN} 2>/dev/null || iptables -I OUTPUT -j {CHAIN}
for ip in "$@"; do
  iptables -C {CHAIN} -s "$ip" -j DROP 2>/dev/null || iptables -A {CHAIN} -s "$ip" -j DROP
  iptables -C {CHAIN} -d "$ip" -j DROP 2>/dev/null || iptables -A {CHAIN} -d "$ip" -j DROP
done
"""

_MEND_SCRIPT = _NEED_IPTABLES + f"""
iptables -S {CHAIN} >/dev/null 2>&1 || exit 0
while iptables -D INPUT -j {CHAIN} 2>/dev/null; do :; done
while iptables -D OUTPUT -j {CHAIN} 2>/dev/null; do :; done
iptables -F {CHAIN} && iptables -X {CHAIN} && echo removed
"""


class ChaosError(Exception):
    """A partition or heal could not be done; the message says why and what to do."""


def partition(node: str, *, from_component: str | None = None, project: str) -> str:
    """Cut `node` (a compose service) from the cluster, or only from `from_component`."""
    container = _container(project, node)
    name = _name(container)
    if from_component is None:
        networks = sorted(container["NetworkSettings"]["Networks"] or {})
        if not networks:
            return f"{node} is already cut from every network of compose project {project}"
        for network in networks:
            _docker("network", "disconnect", network, container["Id"])
        return (f"partitioned {node} from the cluster: disconnected {name} from "
                f"{', '.join(networks)}; `skiff chaos heal {node}` reconnects it")
    if from_component == node:
        raise ChaosError(f"cannot partition {node} from itself; name another component")
    other = _container(project, from_component)
    addresses = _addresses(other)
    if not addresses:
        raise ChaosError(f"{from_component} has no network address in compose project "
                         f"{project} (is it partitioned or stopped?); heal or start it first")
    _run_in_netns(container, _CUT_SCRIPT, addresses)
    return (f"partitioned {node} from {from_component} ({', '.join(addresses)}): packets "
            f"between them are dropped; `skiff chaos heal {node}` ends it")


def heal(node: str | None = None, *, project: str) -> str:
    """Undo every partition of `node`, or of every component of the project when None."""
    if node is None:
        services = _services(project)
        if not services:
            raise ChaosError(f"no containers of compose project {project}; is the compose "
                             f"cluster up (docker compose -p {project} ps)?")
    else:
        services = [node]
    healed: list[str] = []
    for service in services:
        what = _heal_one(_container(project, service), service=service, project=project)
        if what:
            healed.append(f"{service} ({what})")
    if not healed:
        if node is None:
            return f"nothing to heal: no component of compose project {project} is partitioned"
        return f"nothing to heal: {node} is not partitioned"
    return "healed " + "; ".join(healed)


@dataclass
class DockerPartitions:
    """`skiff chaos partition|heal` in the compose project `project`."""

    project: str

    def partition(self, node: str, from_component: str | None = None) -> list[str]:
        return [partition(node, from_component=from_component, project=self.project)]

    def heal(self, node: str | None = None) -> list[str]:
        return [heal(node, project=self.project)]


def _heal_one(container: dict[str, Any], *, service: str, project: str) -> str:
    mode = str((container.get("HostConfig") or {}).get("NetworkMode") or "")
    if mode in ("none", "host") or mode.startswith("container:"):
        return ""  # never on the project's networks (e.g. the one-shot `pki` service)
    done: list[str] = []
    attached = set(container["NetworkSettings"]["Networks"] or {})
    for network in _project_networks(project):
        if network in attached:
            continue
        _docker("network", "connect", "--alias", service, network, container["Id"])
        done.append(f"reconnected to {network}")
    if container["State"].get("Running"):
        if "removed" in _run_in_netns(container, _MEND_SCRIPT, []):
            done.append(f"removed its {CHAIN} rules")
    return ", ".join(done)


def _docker(*args: str, timeout: float = DOCKER_TIMEOUT_SECONDS) -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise ChaosError("docker not found: chaos works on the compose cluster "
                         "(deploy/compose); install Docker and bring the cluster up first")
    try:
        done = subprocess.run([docker, *args], capture_output=True, text=True,
                              timeout=timeout, check=False, env=_docker_env())
    except subprocess.TimeoutExpired as err:
        raise ChaosError(f"`docker {' '.join(args[:3])}` did not answer in {timeout:.0f}s; "
                         f"check the Docker engine") from err
    if done.returncode != 0:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        detail = message[-1] if message else f"exit code {done.returncode}"
        if "Cannot connect to the Docker daemon" in detail or "docker daemon" in detail.lower():
            raise ChaosError(f"no Docker engine answers ({detail}); start Docker or set "
                             f"DOCKER_HOST (deploy/compose/dockerd.sh start prints it)")
        raise ChaosError(f"`docker {' '.join(args)}` failed: {detail}")
    return done.stdout


def _docker_env() -> dict[str, str]:
    """The environment, pointed at dockerd.sh's private engine when it is the only one."""
    env = dict(os.environ)
    if "DOCKER_HOST" not in env and not os.path.exists("/var/run/docker.sock"):
        private = os.path.join(os.environ.get("SKIFF_DOCKER_DIR", os.path.dirname(
            PRIVATE_DOCKER_SOCKET)), "docker.sock")
        if os.path.exists(private):
            env["DOCKER_HOST"] = f"unix://{private}"
    return env


def _services(project: str) -> list[str]:
    out = _docker("ps", "-a", "--filter", f"label={PROJECT_LABEL}={project}",
                  "--filter", NOT_ONE_OFF, "--format", f'{{{{.Label "{SERVICE_LABEL}"}}}}')
    return sorted({line.strip() for line in out.splitlines() if line.strip()})


def _container(project: str, service: str) -> dict[str, Any]:
    ids = _docker("ps", "-a", "-q", "--filter", f"label={PROJECT_LABEL}={project}",
                  "--filter", f"label={SERVICE_LABEL}={service}",
                  "--filter", NOT_ONE_OFF).split()
    if not ids:
        known = _services(project)
        if not known:
            raise ChaosError(f"no containers of compose project {project}; is the compose "
                             f"cluster up (docker compose -p {project} ps)?")
        raise ChaosError(f"no component {service!r} in compose project {project}; "
                         f"components: {', '.join(known)}")
    found: list[dict[str, Any]] = json.loads(_docker("inspect", ids[0]))
    return found[0]


def _name(container: dict[str, Any]) -> str:
    return str(container["Name"]).lstrip("/")


def _addresses(container: dict[str, Any]) -> list[str]:
    networks: dict[str, Any] = container["NetworkSettings"]["Networks"] or {}
    return sorted({n["IPAddress"] for n in networks.values() if n.get("IPAddress")})


def _project_networks(project: str) -> list[str]:
    out = _docker("network", "ls", "--filter", f"label={PROJECT_LABEL}={project}",
                  "--format", "{{.Name}}")
    return sorted(line.strip() for line in out.splitlines() if line.strip())


def _run_in_netns(container: dict[str, Any], script: str, args: list[str]) -> str:
    """Run `script` with iptables in `container`'s network namespace, from a helper."""
    if not container["State"].get("Running"):
        raise ChaosError(f"{_name(container)} is not running; start it "
                         f"(docker compose start) before partitioning it")
    return _docker("run", "--rm", "--network", f"container:{container['Id']}",
                   "--cap-add", "NET_ADMIN", "--entrypoint", "sh",
                   "--label", "skiff.chaos=helper",
                   str(container["Config"]["Image"]), "-c", script, "sh", *args)
