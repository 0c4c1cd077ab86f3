"""SPEC AX3: ServiceAccount admission of pods (defaulting, the wait for `default`, the
refusal of a missing account, the projected token volume)."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.apiserver.admission.serviceaccount import TOKEN_MOUNT_PATH, admit_service_account


def make_pod(**spec: Any) -> Obj:
    return {"metadata": {"name": "p", "namespace": "team"},
            "spec": {"containers": [{"name": "main"}], **spec}}


class Accounts:
    """Answers `get(namespace, name)`; `default` appears after `late` lookups."""

    def __init__(self, *names: str, late: int = 0, automount: bool | None = None) -> None:
        self.names, self.late, self.calls = set(names), late, 0
        self.automount = automount

    async def get(self, namespace: str, name: str) -> Obj | None:
        self.calls += 1
        if name not in self.names or self.calls <= self.late:
            return None
        account: Obj = {"metadata": {"name": name, "namespace": namespace}}
        if self.automount is not None:
            account["automountServiceAccountToken"] = self.automount
        return account


async def test_AX3_default_is_defaulted_and_waited_for_after_namespace_creation() -> None:
    pod, accounts = make_pod(), Accounts("default", late=3)
    await admit_service_account(pod, accounts.get)
    assert pod["spec"]["serviceAccountName"] == "default"
    assert accounts.calls == 4
    [volume] = pod["spec"]["volumes"]
    assert volume["name"].startswith("kube-api-access-")
    assert [next(iter(s)) for s in volume["projected"]["sources"]] == [
        "serviceAccountToken", "configMap", "downwardAPI"]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [
        {"name": volume["name"], "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}]


async def test_AX3_missing_service_account_is_refused_at_once() -> None:
    accounts = Accounts()
    with pytest.raises(ApiError) as refused:
        await admit_service_account(make_pod(serviceAccountName="robot"), accounts.get)
    assert refused.value.reason == Reason.FORBIDDEN
    assert refused.value.message == ('pods "p" is forbidden: error looking up service '
                                     'account team/robot: serviceaccount "robot" not found')
    assert accounts.calls == 1  # only `default` is waited for


@pytest.mark.parametrize(("pod_automount", "account_automount", "mounted"), [
    pytest.param(None, None, True, id="default"),
    pytest.param(False, None, False, id="pod-opts-out"),
    pytest.param(None, False, False, id="account-opts-out"),
    pytest.param(True, False, True, id="pod-overrides-account"),
])
async def test_AX3_automount_service_account_token(pod_automount: bool | None,
                                                   account_automount: bool | None,
                                                   mounted: bool) -> None:
    spec = {} if pod_automount is None else {"automountServiceAccountToken": pod_automount}
    pod = make_pod(**spec)
    await admit_service_account(pod, Accounts("default", automount=account_automount).get)
    assert bool(pod["spec"].get("volumes")) is mounted
