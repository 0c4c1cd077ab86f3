"""A pod's /etc/resolv.conf from `dnsPolicy` and `dnsConfig`, by Kubernetes' kubelet rules
(pkg/kubelet/network/dns): ClusterFirst, ClusterFirstWithHostNet, Default, None, the merge
of dnsConfig and the limits."""

from __future__ import annotations

from typing import Any

import pytest

from skiff.kubelet.dnsconfig import parse_resolv_conf, pod_resolv_conf
from skiff.kubelet.settings import parse_settings
from skiff.settings import SettingsError

HOST = parse_resolv_conf("""# the node's
nameserver 192.0.2.53
nameserver 192.0.2.54
search corp.example lab.example
options timeout:2 rotate
""")


def pod(ns: str = "team", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": ns}, "spec": spec}


def conf(p: dict[str, Any], cluster_dns: list[str] | None = None) -> str:
    out, _ = pod_resolv_conf(p, cluster_dns=["10.96.0.10"] if cluster_dns is None
                             else cluster_dns, cluster_domain="cluster.local", host=HOST)
    return out.render()


def test_cluster_first_uses_the_cluster_dns_with_kubernetes_search_path() -> None:
    assert conf(pod()) == (
        "search team.svc.cluster.local svc.cluster.local cluster.local corp.example "
        "lab.example\nnameserver 10.96.0.10\noptions ndots:5\n")


def test_host_network_pod_with_cluster_first_gets_the_nodes_resolver() -> None:
    assert conf(pod(hostNetwork=True)) == (
        "search corp.example lab.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n"
        "options timeout:2 rotate\n")


def test_cluster_first_with_host_net_uses_the_cluster_dns() -> None:
    assert "nameserver 10.96.0.10\n" in conf(pod(hostNetwork=True,
                                                 dnsPolicy="ClusterFirstWithHostNet"))


def test_default_policy_is_the_nodes_resolv_conf() -> None:
    assert conf(pod(dnsPolicy="Default")).startswith("search corp.example lab.example\n")


def test_none_policy_is_only_the_pods_dns_config() -> None:
    p = pod(dnsPolicy="None", dnsConfig={
        "nameservers": ["1.2.3.4"], "searches": ["ns1.svc.cluster-domain.example",
                                                 "my.dns.search.suffix"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]})
    # the example of "Pod's DNS Config" in the Kubernetes documentation
    assert conf(p) == ("search ns1.svc.cluster-domain.example my.dns.search.suffix\n"
                       "nameserver 1.2.3.4\noptions ndots:2 edns0\n")


def test_dns_config_is_appended_and_its_options_win() -> None:
    p = pod(dnsConfig={"nameservers": ["10.96.0.10", "1.1.1.1"], "searches": ["extra.example"],
                       "options": [{"name": "ndots", "value": "1"}, {"name": "single-request"}]})
    assert conf(p) == (
        "search team.svc.cluster.local svc.cluster.local cluster.local corp.example "
        "lab.example extra.example\nnameserver 10.96.0.10\nnameserver 1.1.1.1\n"
        "options ndots:1 single-request\n")


def test_more_than_three_nameservers_are_cut_with_a_note() -> None:
    out, _ = pod_resolv_conf(pod(dnsPolicy="Default", dnsConfig={
        "nameservers": ["1.1.1.1", "8.8.8.8"]}), cluster_dns=[], cluster_domain="cluster.local",
        host=HOST)
    assert out.nameservers == ("192.0.2.53", "192.0.2.54", "1.1.1.1")
    assert out.notes and "1.1.1.1" in out.notes[0]


def test_cluster_first_without_cluster_dns_falls_back_to_default() -> None:
    out, fell_back = pod_resolv_conf(pod(), cluster_dns=[], cluster_domain="cluster.local",
                                     host=HOST)
    assert fell_back and out.nameservers == HOST.nameservers


def test_bad_cluster_dns_and_domain_flags_name_the_flag() -> None:
    with pytest.raises(SettingsError, match="--cluster-dns"):
        parse_settings(["--cluster-dns", "ten.nine"])
    with pytest.raises(SettingsError, match="--cluster-domain"):
        parse_settings(["--cluster-domain", "Bad_Domain"])
    assert parse_settings(["--cluster-dns", ""]).cluster_dns_addresses() == []
