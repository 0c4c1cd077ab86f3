"""The service CIDR's well-known values (SPEC AX7), shared by the apiserver (allocation, the
`kubernetes` and `kube-dns` Services), the PKI (the apiserver certificate's SANs) and
`skiff up` (the kubelets' `--cluster-dns`)."""

from __future__ import annotations

import ipaddress

__all__ = ["DEFAULT_SERVICE_CIDR", "KUBERNETES_SERVICE_NAMES", "dns_service_ip",
           "kubernetes_service_ip"]

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
# The names a pod dials the apiserver by (kube-apiserver's certificate carries them too).
KUBERNETES_SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                            "kubernetes.default.svc.cluster.local")


def kubernetes_service_ip(cidr: str) -> str:
    """The `kubernetes` Service's address: the first address of the range."""
    return str(ipaddress.ip_network(cidr, strict=False).network_address + 1)


def dns_service_ip(cidr: str) -> str:
    """The `kube-system/kube-dns` Service's address, which the kubelets' `--cluster-dns`
    names: the tenth address of the range, as kubeadm places it (10.96.0.10)."""
    return str(ipaddress.ip_network(cidr, strict=False).network_address + 10)
