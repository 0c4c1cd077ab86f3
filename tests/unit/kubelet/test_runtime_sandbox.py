"""The runtime's pod sandbox step (CRI's RunPodSandbox / StopPodSandbox / RemovePodSandbox).

Every runtime implements it: the process runtime without a sandbox manager (not root, or
`--sandbox=none`) leaves pods on the node's network and says why; hollow nodes' fake
runtime records its sandboxes' states; a `hostNetwork` pod asked to share the node, so it
is not told.
"""

from __future__ import annotations

import pytest

from skiff.api.types import Obj
from skiff.kubelet.runtime import ContainerRuntime, PodSandboxConfig
from skiff.kubelet.runtime.fake import FakeRuntime
from skiff.kubelet.runtime.process import ProcessRuntime
from skiff.kubelet.sandbox import NOT_ISOLATED_MESSAGE


def _pod(*, host_network: bool = False) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "command": ["true"]}]}
    if host_network:
        spec["hostNetwork"] = True
    return {"metadata": {"name": "p", "namespace": "default", "uid": "u-1"}, "spec": spec}


@pytest.mark.parametrize("runtime", [
    pytest.param(ProcessRuntime(), id="process-without-sandboxes"),
    pytest.param(FakeRuntime(), id="fake"),
])
async def test_a_pod_without_a_sandbox_is_told_it_shares_the_node(
        runtime: ContainerRuntime) -> None:
    made = await runtime.run_pod_sandbox(PodSandboxConfig(pod=_pod()))
    assert made.sandbox is None
    assert made.not_isolated == NOT_ISOLATED_MESSAGE
    shared = await runtime.run_pod_sandbox(PodSandboxConfig(pod=_pod(host_network=True)))
    assert shared.sandbox is None and shared.not_isolated == ""
    await runtime.stop_pod_sandbox("u-1")
    await runtime.remove_pod_sandbox("u-1")
    await runtime.remove_pod_sandbox("u-1")  # idempotent, as CRI's


async def test_the_fake_runtime_records_its_sandboxes_states() -> None:
    runtime = FakeRuntime()
    await runtime.run_pod_sandbox(PodSandboxConfig(pod=_pod()))
    assert runtime.sandboxes == {"u-1": "READY"}
    await runtime.stop_pod_sandbox("u-1")
    assert runtime.sandboxes == {"u-1": "NOTREADY"}
    await runtime.remove_pod_sandbox("u-1")
    assert runtime.sandboxes == {}


def test_a_sandbox_config_names_its_pod() -> None:
    config = PodSandboxConfig(pod=_pod(host_network=True), holders=(42,))
    assert (config.uid, config.host_network, config.holders) == ("u-1", True, (42,))
