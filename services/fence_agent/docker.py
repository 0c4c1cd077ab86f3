"""The Docker engine as out-of-band access to compose nodes (docker mode of the agents).

A compose node is the container whose compose labels name the project and the service
(the service name is the node name), found and inspected through the `docker` command, as
`skiff.cli.chaos` does, so any engine the command reaches works (DOCKER_HOST included).
Calls run as subprocesses without blocking the event loop and fail as `FenceError`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from typing import Any

from skiff.cli.chaos import PRIVATE_DOCKER_SOCKET, PROJECT_LABEL, SERVICE_LABEL
from skiff.fence_agent.agent import FenceError

__all__ = ["DockerCli"]

Obj = dict[str, Any]


class DockerCli:
    def __init__(self, *, project: str, timeout: float = 60.0) -> None:
        self.project = project
        self.timeout = timeout

    async def run(self, *args: str) -> str:
        docker = shutil.which("docker")
        if docker is None:
            raise FenceError("docker not found: docker-mode fencing needs the docker command "
                             "and access to the compose cluster's engine")
        env = dict(os.environ)
        if "DOCKER_HOST" not in env and not os.path.exists("/var/run/docker.sock") and \
                os.path.exists(PRIVATE_DOCKER_SOCKET):
            env["DOCKER_HOST"] = f"unix://{PRIVATE_DOCKER_SOCKET}"
        proc = await asyncio.create_subprocess_exec(
            docker, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL, env=env)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise FenceError(f"`docker {' '.join(args[:2])}` did not answer in "
                             f"{self.timeout:g}s; check the Docker engine") from None
        if proc.returncode != 0:
            lines = (err or out).decode(errors="replace").strip().splitlines()
            detail = lines[-1] if lines else f"exit code {proc.returncode}"
            raise FenceError(f"`docker {' '.join(args)}` failed: {detail}")
        return out.decode(errors="replace")

    async def inspect_service(self, service: str) -> Obj:
        ids = (await self.run("ps", "-a", "-q", "--filter", f"label={PROJECT_LABEL}="
                              f"{self.project}", "--filter",
                              f"label={SERVICE_LABEL}={service}")).split()
        if not ids:
            raise FenceError(f"no container for node {service} in compose project "
                             f"{self.project}; is the compose cluster up, and is "
                             "--compose-project right?")
        found: list[Obj] = json.loads(await self.run("inspect", ids[0]))
        return found[0]

    @staticmethod
    def name(container: Obj) -> str:
        return str(container.get("Name", "")).lstrip("/")
