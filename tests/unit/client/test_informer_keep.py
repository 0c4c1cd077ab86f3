"""An informer's `keep` (a process of many hollow nodes keeps only its own nodes' pods):
what it refuses is never stored nor handed to a handler, and an object that stops being
kept leaves the cache as a deletion, as one leaving a watch's selector does."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from skiff.api.types import Obj
from skiff.client import Informer
from skiff.client.fake import FakeClient


def _pod(name: str, node: str = "") -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}}


async def _eventually(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(3):
        while not check():
            await asyncio.sleep(0.01)


async def test_issue37_an_informer_keeps_only_what_keep_accepts_and_tells_handlers_of_nothing_else(
        ) -> None:
    client = FakeClient()
    client.add(_pod("mine-listed", "node-a"), _pod("theirs-listed", "node-b"),
               _pod("unbound"))
    informer = Informer(client, "pods",
                        keep=lambda p: p["spec"].get("nodeName") in ("node-a", "node-c"))
    seen: list[tuple[str, str]] = []
    informer.add_handler(on_add=lambda o: seen.append(("add", o["metadata"]["name"])),
                         on_update=lambda _o, n: seen.append(("update", n["metadata"]["name"])),
                         on_delete=lambda o: seen.append(("delete", o["metadata"]["name"])))
    task = asyncio.create_task(informer.run())
    try:
        await informer.wait_synced(3)
        assert informer.store.keys() == ["default/mine-listed"]

        client.add(_pod("theirs", "node-b"))
        client.add(_pod("mine", "node-c"))
        await _eventually(lambda: ("add", "mine") in seen)
        # the kept pod moves out of the selection: it leaves as a deletion
        client.add(_pod("mine-listed", "node-b"))
        await _eventually(lambda: ("delete", "mine-listed") in seen)
        await client.delete("pods", "theirs", "default", grace_period_seconds=0)
        await client.delete("pods", "mine", "default", grace_period_seconds=0)
        await _eventually(lambda: ("delete", "mine") in seen)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen == [("add", "mine-listed"), ("add", "mine"), ("delete", "mine-listed"),
                    ("delete", "mine")]
    assert informer.store.keys() == []
