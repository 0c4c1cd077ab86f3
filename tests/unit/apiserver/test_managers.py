"""AX1: the field manager of a gRPC write, named as Kubernetes names its components."""

from __future__ import annotations

import pytest

from skiff.apiserver.endpoints.handlers.fieldmanager.managers import from_metadata, from_user_agent


@pytest.mark.parametrize(("user_agent", "manager"), [
    ("skiff-kubelet grpc-python-asyncio/1.68.1 grpc-c/44.0.0 (linux; chttp2)", "kubelet"),
    ("skiff-scheduler grpc-python-asyncio/1.68.1", "kube-scheduler"),
    ("skiff-controller-manager grpc-python-asyncio/1.68.1", "kube-controller-manager"),
    ("skiff-fence-agent grpc-python-asyncio/1.68.1", "skiff-fence-agent"),
    ("kubectl/v1.32.4 (linux/amd64) kubernetes/4cb5f07", "kubectl"),
])
def test_AX1_grpc_manager_from_the_user_agent(user_agent: str, manager: str) -> None:
    assert from_user_agent(user_agent) == manager
    assert from_metadata([("x-other", b"1"), ("user-agent", user_agent.encode())]) == manager


def test_AX1_grpc_manager_without_a_user_agent_is_unknown() -> None:
    assert from_metadata([]) == "unknown"
