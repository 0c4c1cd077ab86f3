"""The service CIDR's well-known values (SPEC AX7), shared by the apiserver (allocation),
the PKI (the apiserver certificate's SANs) and `skiff up`."""

from __future__ import annotations

import ipaddress

__all__ = ["DEFAULT_SERVICE_CIDR", "KUBERNETES_SERVICE_NAMES", "kubernetes_service_ip"]

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
# The names a pod dials the apiserver by (kube-apiserver's certificate carries them too).
KUBERNETES_SERVICE_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc",
                            "kubernetes.default.svc.cluster.local")


def kubernetes_service_ip(cidr: str) -> str:
    """The `kubernetes` Service's address: the first address of the range."""
    return str(ipaddress.ip_network(cidr, strict=False).network_address + 1)
