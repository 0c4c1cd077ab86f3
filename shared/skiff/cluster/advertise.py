"""`skiff up --advertise-address IP`: the control plane reachable from other machines.

kubeadm's `init --apiserver-advertise-address`: the apiservers listen on every address of
the machine (kube-apiserver's default bind address, 0.0.0.0, so loopback still serves the
local components and the CLI) on fixed, well-known ports instead of free loopback ones, so
a firewall can open them: apiserver-N's gRPC API on 6443+N-1 and its HTTPS (kubectl) API on
8080+N-1, the ports a `--netns` cluster uses. The address goes into the apiserver serving
certificate as an IP SAN, the kubeconfig, cluster-info and the `kubernetes` Service's
endpoints, and `skiff token create --print-join-command` prints it.

This module checks the address before anything starts and answers the ports; the launcher
(`local`) does the rest.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from skiff.cluster.processes import StartError

__all__ = ["ADVERTISE_KEY", "GRPC_PORT", "HTTPS_PORT", "check_address", "check_ports",
           "ports"]

ADVERTISE_KEY = "advertiseAddress"  # the `apiserver` section's key in `skiff up --config`
GRPC_PORT, HTTPS_PORT = 6443, 8080  # apiserver-1's; the N-th adds N-1


def ports(index: int) -> tuple[int, int]:
    """The gRPC and HTTPS ports of the apiserver at `index` (0 for apiserver-1)."""
    return GRPC_PORT + index, HTTPS_PORT + index


def check_address(address: str) -> str:
    """`address` when it is an IPv4 address of this machine; else a StartError that says
    which of those it is not."""
    flag = f"--advertise-address {address!r}"
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        raise StartError(f"{flag}: not an IP address (give an IPv4 address of this "
                         "machine that the other machines can reach)") from None
    if ip.version != 4:
        raise StartError(f"{flag}: only IPv4 addresses are supported")
    if ip.is_unspecified:
        raise StartError(f"{flag}: give one address of this machine, not 0.0.0.0 (the "
                         "apiservers listen on every address anyway)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((str(ip), 0))
        except OSError as err:
            if err.errno == errno.EADDRNOTAVAIL:
                raise StartError(f"{flag}: not an address of this machine (cannot bind "
                                 "to it; `ip -brief address` lists this machine's)") \
                    from None
            raise StartError(f"{flag}: cannot bind to it: {err.strerror}") from None
    return str(ip)


def check_ports(apiservers: list[str]) -> None:
    """A StartError naming the first of these apiservers' ports that something already
    listens on (another cluster, or another kube-apiserver)."""
    for index, name in enumerate(apiservers):
        for port in ports(index):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind(("0.0.0.0", port))
                except OSError as err:
                    raise StartError(
                        f"--advertise-address: port {port} ({name}'s "
                        f"{'gRPC' if port == ports(index)[0] else 'HTTPS'} API) is not "
                        f"free: {err.strerror}; stop what listens there") from None
