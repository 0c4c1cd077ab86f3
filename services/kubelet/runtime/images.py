"""Images without a command: what the kubelet runs for `image: nginx`.

Skiff runs a container as a local process and never pulls an image, so a container that
names only an image (nearly every real manifest) needs a command from somewhere. The rule,
applied where the kubelet builds a container's command (Kubernetes' entrypoint rules, with
"the image's ENTRYPOINT" read from a table instead of the image):

1. `command` set: `command` + `args`, as always.
2. the image is in the image-command table (`--image-commands`, a YAML/JSON file mapping an
   image name without registry and tag, e.g. `redis`, to a command list): that command +
   `args`.
3. an image without an ENTRYPOINT (busybox, alpine, ubuntu, debian, fedora) given `args`:
   the `args`, which Kubernetes would run as the command.
4. otherwise the stand-in, `python -m skiff.kubelet.runtime.standin`: a long-running process
   that exits 0 on SIGTERM, and serves HTTP 200 (which also satisfies a TCP probe) on
   every port the container declares and every port its probes name, so readiness and
   liveness probes pass and `kubectl create deployment web --image=nginx` ends Running and
   Ready. A port another process already holds (pods share the host network until each pod
   has its own) is skipped with a log line.

`$(VAR)` references in `command` and `args` (not in a table's command, which stands for the
image's ENTRYPOINT) are expanded from the container's final environment, as Kubernetes
does (`poddir.expand_references`: `$$(VAR)` is the literal `$(VAR)`, an unknown `$(NOPE)`
stays as written).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from skiff.api.types import Obj
from skiff.kubelet.poddir import expand_references
from skiff.settings import SettingsError

ImageCommands = Mapping[str, list[str]]

STANDIN_MODULE = "skiff.kubelet.runtime.standin"

# Images whose ENTRYPOINT is empty (their CMD is a shell): `args` alone are the process, so
# `kubectl run -i --image=busybox x -- sh -c '...'` runs `sh -c '...'` as Docker would.
NO_ENTRYPOINT_IMAGES = frozenset({"busybox", "alpine", "ubuntu", "debian", "fedora"})


def image_name(image: str) -> str:
    """`docker.io/library/nginx:1.27@sha256:…` → `nginx`; `ghcr.io/org/app:v1` → `org/app`."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]
    if parts[:1] == ["library"]:
        parts = parts[1:]
    return "/".join(parts)


def load_image_commands(path: str) -> dict[str, list[str]]:
    """The table from `--image-commands`; a clear error names the file and the entry."""
    if not path:
        return {}
    try:
        text = Path(path).read_text()
        data = yaml.safe_load(text) if not path.endswith(".json") else json.loads(text)
    except (OSError, ValueError, yaml.YAMLError) as err:
        raise SettingsError(f"--image-commands {path}: cannot read the table: {err}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"--image-commands {path}: must map image names to command lists")
    table: dict[str, list[str]] = {}
    for image, command in data.items():
        if not isinstance(command, list) or not command or not all(
                isinstance(c, str) for c in command):
            raise SettingsError(f"--image-commands {path}: {image!r} must map to a non-empty "
                             "list of strings")
        table[image_name(str(image))] = list(command)
    return table


def _port_numbers(container: Obj) -> list[int]:
    named: dict[str, int] = {}
    ports: list[int] = []
    for port in container.get("ports") or []:
        if isinstance(port, dict) and isinstance(port.get("containerPort"), int):
            ports.append(port["containerPort"])
            if port.get("name"):
                named[str(port["name"])] = port["containerPort"]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        handler = container.get(probe) or {}
        for kind in ("httpGet", "tcpSocket"):
            port = (handler.get(kind) or {}).get("port")
            if isinstance(port, str) and port in named:
                port = named[port]
            if isinstance(port, str) and port.isdigit():
                port = int(port)
            if isinstance(port, int):
                ports.append(port)
    return sorted(set(ports))


def container_command(container: Obj, table: ImageCommands, *,
                      env: Mapping[str, str] | None = None) -> list[str]:
    """The process the runtime starts for this container (rules in the module docstring),
    with `$(VAR)` in `command` and `args` expanded from `env`, the container's environment
    (none given: nothing is expanded, `$$` included)."""
    command = [str(c) for c in container.get("command") or []]
    args = [str(a) for a in container.get("args") or []]
    if env is not None:
        command = [expand_references(c, env) for c in command]
        args = [expand_references(a, env) for a in args]
    if command:
        return command + args
    mapped = table.get(image_name(str(container.get("image", ""))))
    if mapped:
        return list(mapped) + args
    if args and image_name(str(container.get("image", ""))) in NO_ENTRYPOINT_IMAGES:
        return args
    standin = [sys.executable, "-P", "-m", STANDIN_MODULE]  # -P: not the cwd first on sys.path
    for port in _port_numbers(container):
        standin += ["--port", str(port)]
    return standin
