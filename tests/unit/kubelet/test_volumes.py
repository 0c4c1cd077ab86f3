"""SC1 on the node: when may a pod use its claim's volume (the attachment table)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.kubelet.volumes import attachment_problem, claim_volumes

WAIT = "waiting for volume pvc-1 to be attached to this node"


def va(node: str, *, attached: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pvc-1"}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node},
            "status": {"attached": attached}}


@pytest.mark.parametrize(("attachment", "problem"), [
    pytest.param(None, WAIT, id="no-attachment"),
    pytest.param(va("n1"), None, id="attached-here"),
    pytest.param(va("n2"), f"{WAIT}: it is attached to node n2", id="attached-elsewhere"),
    pytest.param(va("n1", attached=False),
                 f"{WAIT}: the attachment is not confirmed yet (status.attached)",
                 id="not-confirmed"),
    pytest.param(va("n1", deleting=True),
                 f"{WAIT}: its attachment is being deleted (detach)", id="being-detached"),
])
def test_attachment_problem(attachment: dict[str, Any] | None, problem: str | None) -> None:
    assert attachment_problem(attachment, volume="pvc-1", node_name="n1") == problem


def test_claim_volumes() -> None:
    pod = {"spec": {"volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0"}},
        {"name": "scratch", "emptyDir": {}}]}}
    assert claim_volumes(pod) == {"data": "data-web-0"}
