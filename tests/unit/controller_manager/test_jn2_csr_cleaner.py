"""SPEC JN2: the csrcleaner deletes CertificateSigningRequests as kube-controller-manager's
does — issued ones an hour after approval, Denied or Failed ones an hour after the
decision, undecided (or approved, never issued) ones a day after creation, and one whose
certificate has expired at once — and leaves every other CSR alone (fake clock)."""

from __future__ import annotations

import base64
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from skiff.api.types import Obj
from skiff.client.fake import FakeClient
from skiff.clock import FakeClock, rfc3339
from skiff.controller_manager.certificates import CsrCleanerController
from skiff.controller_manager.certificates.cleaner import deletion_due
from skiff.controller_manager.certificates.signing import Issuer, sign
from skiff.controller_manager.controller import ControllerContext
from skiff.controller_manager.informers import SharedInformers
from skiff.controller_manager.settings import ControllerManagerSettings

HOUR = 3600.0
NOW = 1_800_000_000.0  # the fake clock's start


def _certificate(valid_for: datetime.timedelta) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")])
    start = datetime.datetime.fromtimestamp(NOW, datetime.UTC)
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
          .public_key(key.public_key()).serial_number(1)
          .not_valid_before(start - datetime.timedelta(days=1))
          .not_valid_after(start + datetime.timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(key, hashes.SHA256()))
    request = (x509.CertificateSigningRequestBuilder()
               .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "alice")]))
               .sign(key, hashes.SHA256()))
    pem = sign(issuer=Issuer(ca, key), csr=request, usages=["client auth"],
               valid_for=valid_for, now=start)
    return base64.b64encode(pem).decode()


def csr(name: str, *, created: float, conditions: dict[str, float] | None = None,
        certificate: str = "") -> Obj:
    status: Obj = {"conditions": [
        {"type": kind, "status": "True", "reason": "Test", "message": "",
         "lastUpdateTime": rfc3339(at), "lastTransitionTime": rfc3339(at)}
        for kind, at in (conditions or {}).items()]}
    if certificate:
        status["certificate"] = certificate
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name, "uid": f"uid-{name}",
                         "creationTimestamp": rfc3339(created)},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client",
                     "usages": ["client auth"], "request": ""},
            "status": status}


DAY_CERT = _certificate(datetime.timedelta(days=1))


@pytest.mark.parametrize(("obj", "due"), [
    pytest.param(csr("pending", created=NOW), NOW + 24 * HOUR, id="pending-a-day"),
    pytest.param(csr("issued", created=NOW, conditions={"Approved": NOW + 10},
                     certificate=DAY_CERT), NOW + 10 + HOUR, id="issued-an-hour-after"),
    pytest.param(csr("approved-unissued", created=NOW, conditions={"Approved": NOW + 10}),
                 NOW + 24 * HOUR, id="approved-never-issued-a-day"),
    pytest.param(csr("denied", created=NOW, conditions={"Denied": NOW + 60}),
                 NOW + 60 + HOUR, id="denied-an-hour-after"),
    pytest.param(csr("failed", created=NOW, conditions={"Approved": NOW, "Failed": NOW + 5}),
                 NOW + 5 + HOUR, id="failed-an-hour-after"),
])
def test_jn2_csr_cleaner_deadlines_are_kubernetes(obj: Obj, due: float) -> None:
    assert deletion_due(obj) == pytest.approx(due, abs=1)


def test_jn2_csr_cleaner_deletes_an_expired_certificates_csr_before_its_hour() -> None:
    short = _certificate(datetime.timedelta(minutes=10))
    due = deletion_due(csr("short", created=NOW, conditions={"Approved": NOW},
                           certificate=short))
    assert due is not None and due == pytest.approx(NOW + 600, abs=1)


class Harness:
    def __init__(self) -> None:
        self.clock = FakeClock(NOW)
        self.api = FakeClient(clock=self.clock)
        self.ctl = CsrCleanerController(context=ControllerContext(
            client=self.api, informers=SharedInformers(self.api),
            settings=ControllerManagerSettings(), clock=self.clock))

    async def reconcile(self, obj: Obj) -> float | None:
        stored = self.api.add(obj)[0]
        self.ctl.csrs.store.put(stored)
        return await self.ctl.reconcile(str(obj["metadata"]["name"]))

    @property
    def deleted(self) -> list[str]:
        return [a.name for a in self.api.calls("delete", "certificatesigningrequests")]


async def test_jn2_csr_cleaner_deletes_only_when_due_and_requeues_until_then() -> None:
    h = Harness()
    issued = csr("issued", created=NOW, conditions={"Approved": NOW}, certificate=DAY_CERT)
    requeue = await h.reconcile(issued)
    assert h.deleted == [] and requeue is not None and HOUR <= requeue <= HOUR + 1
    h.clock.advance(HOUR + 1)
    assert await h.reconcile(issued) is None
    assert h.deleted == ["issued"]


async def test_jn2_csr_cleaner_keeps_a_fresh_pending_csr() -> None:
    h = Harness()
    h.clock.advance(23 * HOUR)
    requeue = await h.reconcile(csr("fresh", created=NOW))
    assert h.deleted == [] and requeue is not None and requeue <= HOUR + 1
