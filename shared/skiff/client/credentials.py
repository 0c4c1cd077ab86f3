"""The client's credentials (SPEC AU1): the one place a Skiff client learns how to prove
who it is and whom to trust.

Every service and the CLI build their `ApiClient` from a `Credentials`: the cluster CA
(TLS is on when it is set) and either a client certificate and key (components, the admin)
or a bearer token (`--token-auth-file` users, ServiceAccount tokens). On the apiserver's
gRPC port the certificate is proved by a token its key signs (`skiff.certtoken`: grpcio
cannot ask for an optional client certificate); the kubelet's port is mutual TLS.
Services read them from their environment (`SKIFF_CA_FILE`, `SKIFF_CLIENT_CERT_FILE`,
`SKIFF_CLIENT_KEY_FILE`, `SKIFF_TOKEN`), which `skiff up` sets per component; the CLI
(and a component given `--kubeconfig`) reads a kubeconfig's (`Credentials.from_kubeconfig`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import yaml

from skiff.certtoken import CertificateTokens

ENV_CA = "SKIFF_CA_FILE"
ENV_CERT = "SKIFF_CLIENT_CERT_FILE"
ENV_KEY = "SKIFF_CLIENT_KEY_FILE"
ENV_TOKEN = "SKIFF_TOKEN"


@dataclass(frozen=True)
class Credentials:
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    token: str = ""

    @property
    def secure(self) -> bool:
        return bool(self.ca_file)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Credentials:
        env = os.environ if env is None else env
        return cls(ca_file=env.get(ENV_CA, ""), cert_file=env.get(ENV_CERT, ""),
                   key_file=env.get(ENV_KEY, ""), token=env.get(ENV_TOKEN, ""))

    @classmethod
    def from_kubeconfig(cls, kubeconfig: Path) -> Credentials:
        """The current context's TLS files and client certificate (or token) from a
        kubeconfig (JSON or YAML), or none (plaintext) when it has no certificate
        authority or cannot be read."""
        try:
            config = yaml.safe_load(kubeconfig.read_text()) or {}
        except (OSError, yaml.YAMLError):
            return cls()
        contexts = {c.get("name"): c.get("context") or {}
                    for c in config.get("contexts") or ()}
        context = contexts.get(config.get("current-context"), {})
        clusters = {c.get("name"): c.get("cluster") or {}
                    for c in config.get("clusters") or ()}
        users = {u.get("name"): u.get("user") or {} for u in config.get("users") or ()}
        cluster = clusters.get(context.get("cluster"), {})
        user = users.get(context.get("user"), {})

        def path(value: object) -> str:  # relative to the kubeconfig, as kubectl reads it
            return str(kubeconfig.parent / str(value)) if value else ""

        return cls(ca_file=path(cluster.get("certificate-authority")),
                   cert_file=path(user.get("client-certificate")),
                   key_file=path(user.get("client-key")),
                   token=str(user.get("token") or ""))

    def to_env(self) -> dict[str, str]:
        """The environment that makes a child process's `from_env` return these."""
        return {k: v for k, v in ((ENV_CA, self.ca_file), (ENV_CERT, self.cert_file),
                                  (ENV_KEY, self.key_file), (ENV_TOKEN, self.token)) if v}

    def bearer(self) -> Callable[[], str] | None:
        """What this client says in `authorization: Bearer …` on the apiserver's gRPC port:
        a token proving its certificate (re-signed as it ages), else its bearer token."""
        if not self.secure:
            return None
        if self.cert_file and self.key_file:
            return CertificateTokens(self.cert_file, self.key_file).token
        token = self.token
        return (lambda: token) if token else None

    def grpc_credentials(self) -> grpc.ChannelCredentials:
        """TLS trusting the cluster CA, presenting the client certificate to a server that
        asks for one (the kubelet's port)."""
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("a client certificate needs its key (and the key its "
                             "certificate)")
        return grpc.ssl_channel_credentials(
            root_certificates=Path(self.ca_file).read_bytes(),
            private_key=Path(self.key_file).read_bytes() if self.key_file else None,
            certificate_chain=Path(self.cert_file).read_bytes() if self.cert_file else None)

    def channel(self, target: str,
                options: Sequence[tuple[str, Any]]) -> grpc.aio.Channel:
        """A gRPC channel to one apiserver: TLS with these credentials, or plaintext."""
        if not self.secure:
            return grpc.aio.insecure_channel(target, options=options)
        return grpc.aio.secure_channel(target, self.grpc_credentials(), options=options)
