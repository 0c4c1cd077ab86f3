"""Docker-mode power fencing through a fake engine: kill, confirm with inspect, start."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.fence_agent.agent import FenceError
from skiff.fence_agent.docker import DockerCli
from skiff.fence_agent.power import DockerPowerAgent


class FakeDocker(DockerCli):
    def __init__(self, *, running: bool = True, dies: bool = True) -> None:
        super().__init__(project="skiff")
        self.running = running
        self.dies = dies
        self.commands: list[tuple[str, ...]] = []

    async def run(self, *args: str) -> str:
        self.commands.append(args)
        if args[0] == "kill" and self.dies:
            self.running = False
        if args[0] == "start":
            self.running = True
        return ""

    async def inspect_service(self, service: str) -> dict[str, Any]:
        return {"Id": f"id-{service}", "Name": f"/skiff-{service}-1",
                "State": {"Running": self.running}}


async def test_power_fence_kills_the_container_and_confirms_it_stopped() -> None:
    docker = FakeDocker()
    agent = DockerPowerAgent(docker=docker, confirm_timeout=1)
    message = await agent.fence("node-1")
    assert docker.commands == [("kill", "id-node-1")]
    assert "docker inspect confirms it is not running" in message
    assert (await agent.status("node-1")).fenced
    await agent.fence("node-1")  # idempotent: already stopped, nothing killed again
    assert docker.commands == [("kill", "id-node-1")]
    await agent.unfence("node-1")
    assert docker.commands[-1] == ("start", "id-node-1")
    assert not (await agent.status("node-1")).fenced


async def test_power_fence_fails_when_the_container_keeps_running() -> None:
    agent = DockerPowerAgent(docker=FakeDocker(dies=False), confirm_timeout=0.3)
    with pytest.raises(FenceError, match="is running after 0.3s"):
        await agent.fence("node-1")
