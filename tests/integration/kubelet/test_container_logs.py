"""Container log rotation with a real kubelet (SPEC AU10): a chatty container's log is
rotated at `containerLogMaxSize` into at most `containerLogMaxFiles` files (older ones
gzipped), without losing a line, while `logs` reads the current file and `logs -f` goes on
across every rotation. Sizes compressed: 256 KiB × 5 files, checked every 100 ms."""

from __future__ import annotations

import asyncio
import gzip
import sys
from pathlib import Path

import pytest

from skiff.client import ApiClient
from skiff.client.logs import fetch_logs, follow_logs
from skiff.kubelet.logs import rotated_logs
from tests.integration.cluster import Cluster
from tests.integration.kubelet.conftest import (
    get_pod,
    pod_manifest,
    start_kubelet,
    stop_kubelet,
    wait_until,
)

pytestmark = pytest.mark.integration

MAX_SIZE = 256 * 1024
# 100 bytes each: 5.5 MB, more than five files of four times the maximum size can keep
# (the bound asserted below), so the oldest lines must have been dropped however late the
# monitor rotates on a loaded machine (2 MB once fitted in the kept files under CI's load).
LINES = 55_000
# Numbered 100-byte lines at about 1 MB/s, after a pause that lets the follower attach.
WRITER = f"""
import sys, time
time.sleep(2)
for i in range({LINES}):
    sys.stdout.write(f"line {{i:08d}} " + "x" * 85 + "\\n")
    if i % 100 == 99:
        sys.stdout.flush()
        time.sleep(0.01)
sys.stdout.flush()
"""


def numbers(text: str) -> list[int]:
    return [int(line.split()[1]) for line in text.splitlines() if line.startswith("line ")]


def read_any(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode()


async def test_au10_container_logs_rotate_at_max_size_keep_max_files_and_lose_nothing(
        api: ApiClient, namespace: str, shared_cluster: Cluster, tmp_path: Path) -> None:
    node = start_kubelet(shared_cluster, tmp_path, extra=[
        "--container-log-max-size", str(MAX_SIZE), "--container-log-max-files", "5",
        "--container-log-monitor-interval", "100ms"])
    try:
        await api.create(pod_manifest("chatty", namespace, node.name, [
            {"name": "c", "command": [sys.executable, "-u", "-c", WRITER]}], grace=1,
            restartPolicy="Never"))

        async def running() -> bool:
            pod = await get_pod(api, namespace, "chatty")
            statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
            return bool(statuses) and "running" in statuses[0]["state"]

        await wait_until(running, timeout=30, what="chatty running")
        followed = "".join([piece async for piece in follow_logs(
            node.health_target, namespace, "chatty")])
        # `logs -f` saw every line, in order, across every rotation
        assert numbers(followed) == list(range(LINES))

        pod = await get_pod(api, namespace, "chatty")
        assert pod is not None
        uid = pod["metadata"]["uid"]
        logs = node.root / "pods" / uid / "logs" / "c"
        files = list(logs.iterdir())
        current = logs / "0.log"
        rotated = rotated_logs(current)  # oldest first; the order is checked below
        assert sorted(rotated + [current]) == sorted(files)
        assert len(files) <= 5, [f.name for f in files]
        assert len(rotated) >= 2, [f.name for f in files]
        assert [f.name for f in rotated if not f.name.endswith(".gz")] == \
            [rotated[-1].name], "every rotated file but the newest is gzipped"
        kept = [read_any(f) for f in rotated] + [current.read_text()]
        for text in kept[:-1]:
            # rotated at the maximum size, plus what came in one monitoring interval
            assert MAX_SIZE <= len(text) <= 4 * MAX_SIZE, len(text)
        # what is kept is the end of the output, without a gap (nothing lost in a rotation)
        seen = numbers("".join(kept))
        assert seen == list(range(seen[0], LINES)) and seen[0] > 0
        # `logs` reads the current file
        assert await fetch_logs(node.health_target, namespace, "chatty") == current.read_text()
    finally:
        await stop_kubelet(node)
    await asyncio.sleep(0)
