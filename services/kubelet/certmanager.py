"""The kubelet's certificate manager (`pkg/kubelet/certificate`, SPEC JN2): its client
certificate renewed before it expires, and (`--server-tls-bootstrap`) its serving
certificate obtained and renewed, each by a CertificateSigningRequest made with the
kubelet's current identity.

A renewal is a fresh key and a CSR for the same subject once the rotation deadline passed
(a jittered 70–90 % of the lifetime, or `--certificate-rotation-fraction`); the
csrapproving controller approves a node's own client renewal (`selfnodeclient`) and a
serving CSR that names only the Node's own addresses. The new pair replaces the files;
the API client (skiff.certtoken) and the kubelet's TLS port (dynamic credentials, see
skiff.kubelet.serving) take it at their next use, without a restart.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509

from skiff.api import ApiError
from skiff.api.groups.certificates import KUBE_APISERVER_CLIENT_KUBELET, KUBELET_SERVING
from skiff.client import ApiClient, Client
from skiff.client.credentials import Credentials
from skiff.join.certificates import (
    CLIENT_USAGES,
    SERVING_USAGES,
    CertificateRequestError,
    KeyPair,
    build_request,
    new_key,
    request_certificate,
    rotation_deadline,
    write_pair,
)
from skiff.kubelet.serving import KubeletTls
from skiff.kubelet.settings import KubeletSettings

__all__ = ["CertificateManager", "manage_certificates"]

log = logging.getLogger(__name__)


@dataclass
class CertificateManager:
    """One certificate (`pair`) from `signer`: `ensure()` gets it when missing, `run()`
    renews it at each deadline."""

    api: Client
    node_name: str
    pair: KeyPair
    signer: str
    usages: list[str]
    addresses: list[str] = field(default_factory=list)  # a serving certificate's SANs
    fraction: float = 0.0
    check_period: float = 30.0
    request_timeout: float = 900.0
    on_rotated: Callable[[], None] | None = None
    rotations: int = 0
    _rand: random.Random = field(default_factory=random.Random)
    _deadline: tuple[int, datetime.datetime] | None = None

    def current(self) -> x509.Certificate | None:
        try:
            return x509.load_pem_x509_certificate(self.pair.cert_file.read_bytes())
        except (OSError, ValueError):
            return None

    def due(self, now: datetime.datetime | None = None) -> bool:
        """Whether the certificate is missing or past its deadline (drawn once per
        certificate, as Kubernetes' manager jitters it)."""
        cert = self.current()
        if cert is None:
            return True
        if self._deadline is None or self._deadline[0] != cert.serial_number:
            self._deadline = (cert.serial_number, rotation_deadline(
                cert, fraction=self.fraction, rand=self._rand))
        return (now or datetime.datetime.now(datetime.UTC)) >= self._deadline[1]

    async def renew(self) -> str:
        """A new key and certificate by CSR, written over the pair: the CSR's name."""
        key = new_key()
        name, cert_pem = await request_certificate(
            self.api, name=f"csr-{self.node_name}-", signer=self.signer,
            request_pem=build_request(key, node_name=self.node_name,
                                      addresses=self.addresses or None),
            usages=self.usages, timeout=self.request_timeout)
        write_pair(self.pair, cert_pem=cert_pem, key=key)
        self.rotations += 1
        log.info("certificate rotated", extra={"node": self.node_name, "signer": self.signer,
                                               "csr": name})
        if self.on_rotated is not None:
            self.on_rotated()
        return name

    async def ensure(self) -> None:
        """Until the pair exists: ask, and ask again after a failed or timed-out CSR."""
        while self.current() is None:
            await self._attempt()

    async def run(self) -> None:
        while True:
            if self.due():
                await self._attempt()
            await asyncio.sleep(self.check_period)

    async def _attempt(self) -> None:
        try:
            await self.renew()
        except (CertificateRequestError, ApiError, OSError) as err:
            log.warning("certificate request failed; trying again", extra={
                "node": self.node_name, "signer": self.signer, "error": str(err)})
            await asyncio.sleep(self.check_period)


async def manage_certificates(settings: KubeletSettings, *, serving: KubeletTls | None,
                              start_serving: Callable[[], Awaitable[None]]) -> None:
    """Until cancelled: the client certificate renewed (`--rotate-certificates`), and with
    `--server-tls-bootstrap` the serving certificate asked for, the TLS port started with
    it (`start_serving`) and the certificate renewed."""
    node = settings.node_names()[0]

    def manager(pair: KeyPair, *, signer: str, usages: list[str],
                addresses: list[str] | None = None) -> CertificateManager:
        return CertificateManager(
            api=api, node_name=node, pair=pair, signer=signer, usages=usages,
            addresses=addresses or [], fraction=settings.certificate_rotation_fraction,
            check_period=settings.certificate_check_period,
            request_timeout=settings.certificate_request_timeout)

    async with ApiClient(settings.apiserver, user_agent="skiff-kubelet",
                         retry_seconds=60) as api:
        credentials = Credentials.from_env()
        jobs: list[Awaitable[None]] = []
        if settings.rotate_certificates and credentials.cert_file and credentials.key_file:
            jobs.append(manager(KeyPair(Path(credentials.cert_file), Path(credentials.key_file)),
                                signer=KUBE_APISERVER_CLIENT_KUBELET,
                                usages=CLIENT_USAGES).run())
        if serving is not None and settings.server_tls_bootstrap:
            server_certificate = manager(KeyPair(serving.cert_file, serving.key_file),
                                         signer=KUBELET_SERVING, usages=SERVING_USAGES,
                                         addresses=[settings.node_ip, node])

            async def serve() -> None:
                await server_certificate.ensure()
                await start_serving()
                await server_certificate.run()

            jobs.append(serve())
        await asyncio.gather(*jobs)
