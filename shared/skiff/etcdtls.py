"""TLS and client-certificate authentication to etcd (SPEC AU4), for the apiserver and
the CLI's status probes.

aetcd opens only plaintext channels, so `TlsEtcdClient` is aetcd's client with its
connect step opening a gRPC TLS channel that presents the apiserver's etcd client
certificate (`--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`, as kube-apiserver's).
Only the apiservers hold such a certificate; etcd runs with `--client-cert-auth`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aetcd
import aetcd.rpc as etcdrpc
import aetcd.watcher
import grpc


@dataclass(frozen=True)
class EtcdTls:
    cafile: Path
    certfile: Path
    keyfile: Path

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(
            root_certificates=self.cafile.read_bytes(),
            private_key=self.keyfile.read_bytes(),
            certificate_chain=self.certfile.read_bytes())


def etcd_tls(*, cafile: str, certfile: str, keyfile: str) -> EtcdTls | None:
    """The TLS settings of `--etcd-*file`, or None for plaintext (all empty)."""
    if not (cafile or certfile or keyfile):
        return None
    if not (cafile and certfile and keyfile):
        raise SystemExit("--etcd-cafile, --etcd-certfile and "
                         "--etcd-keyfile go together")
    return EtcdTls(Path(cafile), Path(certfile), Path(keyfile))


class TlsEtcdClient(aetcd.Client):  # type: ignore[misc]
    """aetcd.Client over TLS with a client certificate."""

    def __init__(self, *, tls: EtcdTls, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._tls_credentials = tls.credentials()

    async def connect(self) -> None:
        if self._connected.is_set():
            return
        if self._is_connecting:  # type: ignore[has-type]
            async with asyncio.timeout(self._connect_wait_timeout):  # see skiff.tasks
                await self._connected.wait()
            return
        try:
            self._is_connecting = True
            self.channel = grpc.aio.secure_channel(
                f"{self._host}:{self._port}", self._tls_credentials,
                options=list(self._options.items()))
            self.kvstub = etcdrpc.KVStub(self.channel)
            self.clusterstub = etcdrpc.ClusterStub(self.channel)
            self.leasestub = etcdrpc.LeaseStub(self.channel)
            self.maintenancestub = etcdrpc.MaintenanceStub(self.channel)
            self._watcher = aetcd.watcher.Watcher(
                etcdrpc.WatchStub(self.channel), timeout=self._timeout,
                metadata=self.metadata)
            self._connected.set()
        finally:
            self._is_connecting = False
