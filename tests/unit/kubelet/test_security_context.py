"""SPEC AU8: a container's securityContext as the identity and capabilities its process
gets (containerd's default set and its ALL rules), the kubelet's runAsNonRoot messages,
and the kubelet-side subPath check (symlinks that leave the volume are refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skiff.kubelet.sandbox import security
from skiff.kubelet.sandbox.mounts import BindMount, SubPathError, plan_mounts
from skiff.kubelet.sandbox.security import (
    CAPABILITIES,
    DEFAULT_CAPABILITIES,
    plan_security,
    run_as_non_root_error,
)


@pytest.fixture(autouse=True)
def _kubelet_holds_every_capability(monkeypatch: pytest.MonkeyPatch) -> None:
    """As a kubelet running as root on a full node (a container gets no more than that)."""
    monkeypatch.setattr(security, "_own_capabilities", lambda: (1 << len(CAPABILITIES)) - 1)


def _names(mask: int) -> set[str]:
    return {name for i, name in enumerate(CAPABILITIES) if mask & (1 << i)}


def _pod(**sc: object) -> dict[str, object]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
            "spec": {"securityContext": sc}}


def test_au8_default_capabilities_are_containerds_and_root_gets_no_ambient() -> None:
    plan = plan_security(_pod(), {"name": "c"})
    assert _names(plan.capabilities) == set(DEFAULT_CAPABILITIES)
    assert (plan.uid, plan.gid, plan.groups, plan.ambient, plan.no_new_privs) == (
        0, 0, (), 0, False)
    assert plan.home == "/root"


def test_au8_drop_all_then_add_and_add_all_then_drop_as_containerd() -> None:
    only = plan_security(_pod(runAsUser=1000), {"securityContext": {"capabilities": {
        "drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}})
    assert _names(only.capabilities) == {"NET_BIND_SERVICE"}
    assert _names(only.ambient) == {"NET_BIND_SERVICE"}  # non-root: survives exec
    most = plan_security(_pod(), {"securityContext": {"capabilities": {
        "add": ["ALL"], "drop": ["CAP_CHOWN"]}}})
    assert "CHOWN" not in _names(most.capabilities)
    assert "SYS_ADMIN" in _names(most.capabilities)


def test_au8_container_fields_win_over_the_pods_and_groups_collect() -> None:
    plan = plan_security(
        _pod(runAsUser=1000, runAsGroup=1500, supplementalGroups=[4000], fsGroup=2000),
        {"securityContext": {"runAsGroup": 3000, "allowPrivilegeEscalation": False,
                             "readOnlyRootFilesystem": True}})
    assert (plan.uid, plan.gid, plan.groups) == (1000, 3000, (3000, 4000, 2000))
    assert plan.no_new_privs and plan.read_only_root and plan.home == "/"


def test_au8_no_container_gets_a_capability_the_kubelet_lacks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    without_audit_write = ((1 << len(CAPABILITIES)) - 1) & ~(1 << CAPABILITIES.index(
        "AUDIT_WRITE"))
    monkeypatch.setattr(security, "_own_capabilities", lambda: without_audit_write)
    assert _names(plan_security(_pod(), {}).capabilities) == set(DEFAULT_CAPABILITIES) - {
        "AUDIT_WRITE"}
    assert plan_security(_pod(), {"securityContext": {"privileged": True}}).capabilities == \
        without_audit_write


def test_au8_privileged_gets_every_capability_and_no_no_new_privs() -> None:
    plan = plan_security(_pod(), {"securityContext": {"privileged": True,
                                                      "allowPrivilegeEscalation": False}})
    assert {"SYS_ADMIN", "NET_ADMIN", "SYS_MODULE"} <= _names(plan.capabilities)
    assert plan.privileged and not plan.no_new_privs


def test_au8_run_as_non_root_messages_are_the_kubelets() -> None:
    container = {"name": "c"}
    assert run_as_non_root_error(_pod(runAsNonRoot=True), container, image_uid=0) == (
        'container has runAsNonRoot and image will run as root (pod: "p_ns(u-1)", '
        "container: c)")
    assert run_as_non_root_error(_pod(runAsNonRoot=True, runAsUser=0), container,
                                 image_uid=0) == (
        'container\'s runAsUser breaks non-root policy (pod: "p_ns(u-1)", container: c)')
    assert run_as_non_root_error(_pod(runAsNonRoot=True, runAsUser=5), container,
                                 image_uid=0) is None
    assert run_as_non_root_error(_pod(), container, image_uid=0) is None


def test_au8_a_subpath_through_a_symlink_out_of_its_volume_is_refused(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    (volume / "inside").mkdir(parents=True)
    (volume / "out").symlink_to(tmp_path)
    (volume / "ok").symlink_to("inside")

    def mounts(sub: str) -> tuple[BindMount, ...]:
        return plan_mounts({"name": "c", "volumeMounts": [
            {"name": "v", "mountPath": "/m", "subPath": sub}]}, lambda _name: volume)

    with pytest.raises(SubPathError, match='failed to prepare subPath for volumeMount "v" '
                                           'of container "c"'):
        mounts("out")
    with pytest.raises(SubPathError):
        mounts("out/deeper")
    assert not (tmp_path / "deeper").exists()  # nothing made outside the volume
    assert [m.source for m in mounts("ok")] == [str(volume / "inside")]
    assert [m.source for m in mounts("new/dir")] == [str(volume / "new" / "dir")]
