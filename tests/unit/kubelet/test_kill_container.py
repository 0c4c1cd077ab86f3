"""Issue 35's crash on write, the kubelet's side: `/skiff.v1.Kubelet/KillContainer` over a
real gRPC server SIGKILLs the located container's process group and names it; an unknown
pod is the kubelet's NotFound, carried to the caller as an ApiError."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from skiff.api.errors import ApiError, Reason
from skiff.client.credentials import Credentials
from skiff.client.kubeletkill import kill_container
from skiff.kubelet.crashing import KillService

PLAIN = Credentials()  # a plaintext kubelet port (--insecure clusters)


async def test_ct1_kill_container_sigkills_the_process_group_it_locates() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
    handle = SimpleNamespace(pid=child.pid, pgid=os.getpgid(child.pid))

    def locate(namespace: str, name: str, container: str | None) -> tuple[Any, Any]:
        if (namespace, name) != ("shop", "writer"):
            raise ApiError(Reason.NOT_FOUND, f'pod "{name}" not found on node n1')
        return SimpleNamespace(name=container or "main"), handle

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((KillService(lambda: [locate]).handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        target = f"127.0.0.1:{port}"
        with pytest.raises(ApiError) as missing:
            await kill_container(target, namespace="shop", name="other", credentials=PLAIN)
        assert missing.value.reason == Reason.NOT_FOUND
        assert child.poll() is None
        killed = await kill_container(target, namespace="shop", name="writer",
                                      credentials=PLAIN)
        assert killed == ("main", child.pid)
        assert await asyncio.to_thread(child.wait, 5) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        await server.stop(0)
