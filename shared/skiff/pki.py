"""The cluster's certificates (SPEC AU1, AU2): one CA, serving and client certificates.

`skiff up` (and the test fixtures) call `ensure_pki(dir, ...)` once; it makes a CA and, for
every component, a key and a certificate signed by it, with the identity Kubernetes gives
that component in the subject: CN is the user name, O the groups (`system:node:<name>` in
`system:nodes`, the admin in `system:masters`). Serving certificates carry the addresses
and host names clients dial as SANs. Keys are EC P-256 (fast to make and to handshake);
every file is written mode 0600. Existing files are kept, so a restart reuses them.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from skiff.api.serviceips import (
    DEFAULT_SERVICE_CIDR,
    KUBERNETES_SERVICE_NAMES,
    kubernetes_service_ip,
)

CA_NAME = "skiff-ca"
ADMIN_USER = "kubernetes-admin"
MASTERS_GROUP = "system:masters"
NODES_GROUP = "system:nodes"
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
FENCE_AGENT_USER = "system:skiff:fence-agent"
APISERVER_ETCD_CLIENT = "kube-apiserver-etcd-client"
APISERVER_KUBELET_CLIENT = "kube-apiserver-kubelet-client"
VALIDITY = datetime.timedelta(days=365)


def node_user(node: str) -> str:
    return f"system:node:{node}"


@dataclass(frozen=True)
class CertPair:
    """A certificate and its key on disk (PEM)."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Identity:
    """Who a client certificate says its holder is (CN → user, O → groups)."""

    user: str
    groups: tuple[str, ...] = ()


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def x509_name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _covers(cert_file: Path, hosts: Iterable[str]) -> bool:
    """Whether a kept certificate still names every host (a netns cluster's addresses
    may differ from the last start's): if not, it is issued again."""
    wanted = alt_names(hosts)
    if not wanted:
        return True
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return all(name in san for name in wanted)


class CertificateAuthority:
    """The cluster CA: signs serving and client certificates."""

    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey,
                 files: CertPair) -> None:
        self.certificate = cert
        self._key = key
        self.files = files

    @classmethod
    def load_or_create(cls, directory: Path) -> CertificateAuthority:
        files = CertPair(directory / "ca.crt", directory / "ca.key")
        if files.cert.exists() and files.key.exists():
            cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
            key = serialization.load_pem_private_key(files.key.read_bytes(), None)
            if not isinstance(key, ec.EllipticCurvePrivateKey):
                raise ValueError(f"{files.key}: the CA key must be an EC key")
            return cls(cert, key, files)
        key = new_key()
        now = datetime.datetime.now(datetime.UTC)
        subject = x509_name(CA_NAME)
        cert = (x509.CertificateBuilder()
                .subject_name(subject).issuer_name(subject)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + 10 * VALIDITY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False),
                    critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                               critical=False)
                .sign(key, hashes.SHA256()))
        _write(files.key, key_pem(key))
        _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
        return cls(cert, key, files)

    def issue(self, path_stem: Path, *, common_name: str, organizations: Iterable[str] = (),
              hosts: Iterable[str] = (), server: bool = False,
              client: bool = False) -> CertPair:
        """`<stem>.crt` and `<stem>.key`; kept as they are when both already exist."""
        files = CertPair(path_stem.with_suffix(".crt"), path_stem.with_suffix(".key"))
        if files.cert.exists() and files.key.exists() and _covers(files.cert, hosts):
            return files
        key = new_key()
        now = datetime.datetime.now(datetime.UTC)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        builder = (x509.CertificateBuilder()
                   .subject_name(x509_name(common_name, organizations))
                   .issuer_name(self.certificate.subject)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + VALIDITY)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                                  critical=True)
                   .add_extension(x509.KeyUsage(
                       digital_signature=True, key_encipherment=False, key_cert_sign=False,
                       crl_sign=False, content_commitment=False, data_encipherment=False,
                       key_agreement=False, encipher_only=False, decipher_only=False),
                       critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       self._key.public_key()), critical=False))
        san = alt_names(hosts)
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        _write(files.key, key_pem(key))
        _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
        return files


DEFAULT_HOSTS = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ClusterPki:
    """Every certificate a cluster needs, by role. Paths only; see `ensure_pki`."""

    directory: Path
    ca: Path
    apiserver: CertPair  # serving (gRPC + HTTPS)
    # etcd has its own CA (as kubeadm's etcd/ca): a component's certificate from the
    # cluster CA is no key to etcd; only the apiservers hold an etcd client certificate.
    etcd_ca: Path
    apiserver_etcd_client: CertPair
    etcd_server: CertPair  # serving, client URLs
    etcd_peer: CertPair
    admin: CertPair
    scheduler: CertPair
    controller_manager: CertPair
    fence_agent: CertPair
    nodes: dict[str, CertPair]
    # The kubelets' own port (logs, exec, metrics): each kubelet's serving certificate
    # (its node's name and addresses as SANs) and the apiserver's client certificate for
    # it (kube-apiserver's --kubelet-client-certificate).
    kubelet_serving: dict[str, CertPair]
    apiserver_kubelet_client: CertPair
    # The aggregation layer (SPEC EX8): a CA of its own for the front proxy, as kubeadm
    # makes, and the apiserver's client certificate for extension apiservers, which trust
    # the X-Remote-* headers only from a client that CA signed with an allowed name.
    front_proxy_ca: Path
    front_proxy_client: CertPair

    def node(self, name: str) -> CertPair:
        return self.nodes[name]

    def etcd_tls_args(self) -> list[str]:
        """kube-apiserver's flags for TLS to etcd."""
        return ["--etcd-cafile", str(self.etcd_ca),
                "--etcd-certfile", str(self.apiserver_etcd_client.cert),
                "--etcd-keyfile", str(self.apiserver_etcd_client.key)]

    def apiserver_tls_args(self) -> list[str]:
        """kube-apiserver's serving and client-authentication flags."""
        return ["--tls-cert-file", str(self.apiserver.cert),
                "--tls-private-key-file", str(self.apiserver.key),
                "--client-ca-file", str(self.ca),
                "--kubelet-client-certificate", str(self.apiserver_kubelet_client.cert),
                "--kubelet-client-key", str(self.apiserver_kubelet_client.key),
                "--kubelet-certificate-authority", str(self.ca),
                "--proxy-client-cert-file", str(self.front_proxy_client.cert),
                "--proxy-client-key-file", str(self.front_proxy_client.key),
                "--requestheader-client-ca-file", str(self.front_proxy_ca),
                "--requestheader-allowed-names", FRONT_PROXY_CLIENT]


FRONT_PROXY_CLIENT = "front-proxy-client"  # kubeadm's name for it


def ensure_pki(directory: Path, *, nodes: Iterable[str] = (),
               hosts: Iterable[str] = (),
               node_hosts: Mapping[str, Iterable[str]] | None = None,
               service_cidr: str = DEFAULT_SERVICE_CIDR) -> ClusterPki:
    """Make (or reuse) the CA and every certificate in `directory` (mode 0700, files 0600).

    `hosts`: extra addresses/host names the apiservers and etcd members are dialled at
    (netns addresses, compose service names); loopback is always included. `node_hosts`:
    a node's own addresses (its InternalIP in a netns cluster) for its kubelet's serving
    certificate, which always names the node and loopback. The apiserver's certificate
    also names the `kubernetes` Service (its cluster IP, the first address of
    `service_cidr`, and `kubernetes.default.svc`...), which in-cluster clients dial."""
    nodes = tuple(nodes)
    node_hosts = node_hosts or {}
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    ca = CertificateAuthority.load_or_create(directory)
    (directory / "etcd").mkdir(mode=0o700, exist_ok=True)
    etcd_ca = CertificateAuthority.load_or_create(directory / "etcd")
    (directory / "front-proxy").mkdir(mode=0o700, exist_ok=True)
    front_proxy_ca = CertificateAuthority.load_or_create(directory / "front-proxy")
    all_hosts = (*DEFAULT_HOSTS, *hosts)

    def client(stem: str, user: str, *groups: str) -> CertPair:
        return ca.issue(directory / stem, common_name=user, organizations=groups,
                        client=True)

    return ClusterPki(
        directory=directory,
        ca=ca.files.cert,
        apiserver=ca.issue(directory / "apiserver", common_name="kube-apiserver",
                           hosts=(*all_hosts, *KUBERNETES_SERVICE_NAMES,
                                  kubernetes_service_ip(service_cidr)), server=True),
        etcd_ca=etcd_ca.files.cert,
        apiserver_etcd_client=etcd_ca.issue(directory / "etcd" / "apiserver-etcd-client",
                                            common_name=APISERVER_ETCD_CLIENT, client=True),
        etcd_server=etcd_ca.issue(directory / "etcd" / "server", common_name="etcd",
                                  hosts=all_hosts, server=True, client=True),
        etcd_peer=etcd_ca.issue(directory / "etcd" / "peer", common_name="etcd-peer",
                                hosts=all_hosts, server=True, client=True),
        admin=client("admin", ADMIN_USER, MASTERS_GROUP),
        scheduler=client("scheduler", SCHEDULER_USER),
        controller_manager=client("controller-manager", CONTROLLER_MANAGER_USER),
        fence_agent=client("fence-agent", FENCE_AGENT_USER),
        nodes={n: client(f"kubelet-{n}", node_user(n), NODES_GROUP) for n in nodes},
        kubelet_serving={n: ca.issue(directory / f"kubelet-{n}-serving",
                                     common_name=node_user(n), organizations=(NODES_GROUP,),
                                     hosts=(n, *DEFAULT_HOSTS, *node_hosts.get(n, ())),
                                     server=True) for n in nodes},
        # no group: the name alone opens the kubelets, nothing on the apiserver
        apiserver_kubelet_client=client("apiserver-kubelet-client", APISERVER_KUBELET_CLIENT),
        front_proxy_ca=front_proxy_ca.files.cert,
        front_proxy_client=front_proxy_ca.issue(directory / "front-proxy" / "client",
                                                common_name=FRONT_PROXY_CLIENT, client=True),
    )


def issue_client(directory: Path, stem: str, *, user: str,
                 groups: Iterable[str] = ()) -> CertPair:
    """One more client certificate from the CA in `directory` (e.g. for a test user)."""
    ca = CertificateAuthority.load_or_create(directory)
    return ca.issue(directory / stem, common_name=user, organizations=groups, client=True)


def identity_of(pem: bytes) -> Identity:
    """The user (CN) and groups (O) of a PEM client certificate (already verified by TLS)."""
    cert = x509.load_pem_x509_certificate(pem)
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    return Identity(user=str(cns[0].value) if cns else "",
                    groups=tuple(str(o.value) for o in orgs))
