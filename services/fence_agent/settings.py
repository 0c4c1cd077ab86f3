"""The fence agent's settings: where the API is, and how it reaches the nodes out of band.

`--mode local` fences the nodes of a `skiff up` cluster through its data dir (cluster.json,
the kubelets' records); `--mode docker` fences the compose cluster's node containers
through the Docker Engine API on `--docker-host` (by default DOCKER_HOST, else
/var/run/docker.sock); `--compose-project` defaults to the project of the container the
agent runs in, which is how the compose file starts it.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.fence_agent.docker import resolve_docker_host
from skiff.settings import SettingsError, duration, load_settings, setting

__all__ = ["FenceAgentSettings", "parse_settings"]

MODES = ("local", "docker")


@dataclass(frozen=True)
class FenceAgentSettings:
    apiserver: str = setting("127.0.0.1:6443", help="apiserver host:port")
    health_port: int = setting(10260, help="gRPC health port on 127.0.0.1 (0 = none)")
    log_level: str = setting("INFO", help="DEBUG, INFO, WARNING or ERROR")
    mode: str = setting("local", help="local (a `skiff up` cluster's processes) or docker "
                                      "(the compose cluster's containers)")
    data_dir: str = setting("", help="local mode: the `skiff up` data dir (cluster.json)")
    compose_project: str = setting("", help="docker mode: the compose project name (default: "
                                           "that of the container this agent runs in)")
    docker_host: str = setting("", help="docker mode: the engine, unix:///path or tcp://host:"
                                        "port (default: DOCKER_HOST, else "
                                        "unix:///var/run/docker.sock)")
    resync_period: float = duration(5.0, help="how often fenced nodes are re-checked "
                                              "(keep-down)")
    confirm_timeout: float = duration(10.0, help="how long an agent waits to confirm a fence")


def parse_settings(argv: list[str] | None) -> FenceAgentSettings:
    settings = load_settings(FenceAgentSettings, argv, prog="skiff-fence-agent",
                             env_prefix="SKIFF_FENCE_AGENT_",
                             description="Skiff's fence agent: fences nodes for Fence objects "
                                         "with out-of-band access, like a BMC.")
    if settings.mode not in MODES:
        raise SettingsError(f"--mode: {settings.mode!r} is not local or docker")
    if settings.mode == "local" and not settings.data_dir:
        raise SettingsError("--data-dir: required in local mode (the `skiff up` data dir "
                            "holding cluster.json)")
    if settings.mode == "docker":
        host = resolve_docker_host(settings.docker_host)
        if not host.startswith(("unix://", "tcp://", "/")):
            raise SettingsError(f"--docker-host (or DOCKER_HOST): {host!r} is not "
                                "unix:///path/docker.sock or tcp://host:port (no TLS)")
    return settings
