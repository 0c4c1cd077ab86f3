"""Kubernetes' CEL `ip` and `cidr` libraries (`k8s.io/apiserver/pkg/cel/library/ip.go`,
`cidr.go`): `isIP(s)`, `ip(s).family()`, `cidr(s).containsIP(ip)`...

An IP or a CIDR is an opaque type in Kubernetes; here, as for URLs and quantities
(`skiff.api.cel.library`), it is a map with a marker key (`__ip__`, `__cidr__`) holding its
text, and its member functions are declared on maps.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from cel_expr_python import cel  # type: ignore[import-untyped]

_IP = "__ip__"
_CIDR = "__cidr__"
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _q(text: str) -> str:
    """Go's %q."""
    return json.dumps(text, ensure_ascii=False)


def _parse_ip(text: str) -> IPAddress:
    """An IP as Kubernetes' CEL accepts it: no zone, no IPv4-mapped IPv6 form."""
    if "%" in text:
        raise ValueError(f"IP Address {_q(text)} parse error during conversion from string: "
                         "IP address with zone value is not allowed")
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"IP Address {_q(text)} parse error during conversion from string: "
                         f"ParseAddr({_q(text)}): unable to parse IP") from None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        raise ValueError(f"IP Address {_q(text)} parse error during conversion from string: "
                         "IPv4-mapped IPv6 address is not allowed")
    return addr


def _parse_cidr(text: str) -> tuple[IPAddress, IPNetwork]:
    address, _, _prefix = text.partition("/")
    if not _prefix:
        raise ValueError(f"network address {_q(text)} parse error during conversion from "
                         "string: no '/'")
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ValueError(f"network address {_q(text)} parse error during conversion from "
                         "string: invalid prefix") from None
    return _parse_ip(address), network


def _is_ip(text: str) -> bool:
    try:
        _parse_ip(text)
    except ValueError:
        return False
    return True


def _is_cidr(text: str) -> bool:
    try:
        _parse_cidr(text)
    except ValueError:
        return False
    return True


def _ip_of(value: Any) -> IPAddress:
    if isinstance(value, str):
        return _parse_ip(value)
    if isinstance(value, dict) and _IP in value:
        return _parse_ip(value[_IP])
    raise ValueError("no such overload")


def _cidr_of(value: Any) -> tuple[IPAddress, IPNetwork]:
    if isinstance(value, str):
        return _parse_cidr(value)
    if isinstance(value, dict) and _CIDR in value:
        return _parse_cidr(value[_CIDR])
    raise ValueError("no such overload")


def _ip(text: str) -> dict[str, Any]:
    _parse_ip(text)
    return {_IP: text}


def _cidr(text: str) -> dict[str, Any]:
    _parse_cidr(text)
    return {_CIDR: text}


def _contains_ip(network: Any, addr: Any) -> bool:
    ip = _ip_of(addr)
    return ip.version == _cidr_of(network)[1].version and ip in _cidr_of(network)[1]


def _contains_cidr(network: Any, other: Any) -> bool:
    outer, inner = _cidr_of(network)[1], _cidr_of(other)[1]
    return outer.version == inner.version and inner.subnet_of(outer)  # type: ignore[arg-type]


def _is_global_unicast(value: Any) -> bool:
    ip = _ip_of(value)
    if ip.is_unspecified or ip.is_loopback or ip.is_multicast or ip.is_link_local:
        return False
    return not (ip.version == 4 and int(ip) == 0xFFFFFFFF)


def _is_link_local_multicast(value: Any) -> bool:
    ip = _ip_of(value)
    if ip.version == 4:
        return ip in ipaddress.ip_network("224.0.0.0/24")
    return ip.is_multicast and (int(ip) >> 112) & 0xF == 2


def declarations() -> list[Any]:
    """The ip and cidr libraries' functions, for `skiff.api.cel.library.extension`."""
    m = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    s, b, i = cel.Type.STRING, cel.Type.BOOL, cel.Type.INT

    def member(name: str, oid: str, result: Any, params: list[Any], impl: Any) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(oid, result, params, is_member=True,
                                                    impl=impl)])

    def function(name: str, oid: str, result: Any, params: list[Any], impl: Any) -> Any:
        return cel.FunctionDecl(name, [cel.Overload(oid, result, params, is_member=False,
                                                    impl=impl)])

    return [
        function("isIP", "k8s_is_ip", b, [s], _is_ip),
        function("ip", "k8s_ip", m, [s], _ip),
        function("ip.isCanonical", "k8s_ip_is_canonical", b, [s],
                 lambda text: str(_parse_ip(text)) == text),
        member("family", "k8s_ip_family", i, [m], lambda v: _ip_of(v).version),
        member("isUnspecified", "k8s_ip_is_unspecified", b, [m],
               lambda v: _ip_of(v).is_unspecified),
        member("isLoopback", "k8s_ip_is_loopback", b, [m], lambda v: _ip_of(v).is_loopback),
        member("isLinkLocalMulticast", "k8s_ip_is_ll_multicast", b, [m],
               _is_link_local_multicast),
        member("isLinkLocalUnicast", "k8s_ip_is_ll_unicast", b, [m],
               lambda v: _ip_of(v).is_link_local),
        member("isGlobalUnicast", "k8s_ip_is_global_unicast", b, [m], _is_global_unicast),
        function("isCIDR", "k8s_is_cidr", b, [s], _is_cidr),
        function("cidr", "k8s_cidr", m, [s], _cidr),
        cel.FunctionDecl("containsIP", [
            cel.Overload("k8s_cidr_contains_ip", b, [m, m], is_member=True, impl=_contains_ip),
            cel.Overload("k8s_cidr_contains_ip_string", b, [m, s], is_member=True,
                         impl=_contains_ip)]),
        cel.FunctionDecl("containsCIDR", [
            cel.Overload("k8s_cidr_contains_cidr", b, [m, m], is_member=True,
                         impl=_contains_cidr),
            cel.Overload("k8s_cidr_contains_cidr_string", b, [m, s], is_member=True,
                         impl=_contains_cidr)]),
        member("ip", "k8s_cidr_ip", m, [m], lambda v: {_IP: str(_cidr_of(v)[0])}),
        member("masked", "k8s_cidr_masked", m, [m], lambda v: {_CIDR: str(_cidr_of(v)[1])}),
        member("prefixLength", "k8s_cidr_prefix_length", i, [m],
               lambda v: _cidr_of(v)[1].prefixlen),
    ]
