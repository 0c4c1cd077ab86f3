"""A pod's /etc/resolv.conf from its `dnsPolicy` and `dnsConfig`, as the kubelet writes it.

Why here: the kubelet, not the pod, decides which resolver a container asks; Kubernetes'
rules (pkg/kubelet/network/dns) are followed so a manifest's expectations hold:
- `ClusterFirst` (the default): the cluster DNS (`--cluster-dns`), searches
  `<ns>.svc.<domain> svc.<domain> <domain>` then the node's own, `options ndots:5`; a
  `hostNetwork` pod gets the node's resolver instead, unless the policy is
  `ClusterFirstWithHostNet`. With no `--cluster-dns` configured, ClusterFirst falls back to
  `Default` (and the kubelet says so on the pod, reason MissingClusterDNS).
- `Default`: the node's resolv.conf (`--resolv-conf`); `None`: nothing but `dnsConfig`.
- `dnsConfig` is appended: nameservers and searches without duplicates, options merged by
  name (the pod's value wins); at most 3 nameservers and 32 searches are kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from skiff.api.types import Obj
from skiff.api.validation import MAX_DNS_NAMESERVERS, MAX_DNS_SEARCH_PATHS

__all__ = ["MISSING_CLUSTER_DNS", "ResolvConf", "parse_resolv_conf", "pod_resolv_conf"]

MISSING_CLUSTER_DNS = ("kubelet does not have ClusterDNS IP configured and cannot create Pod "
                       'using "ClusterFirst" policy. Falling back to "Default" policy.')


@dataclass(frozen=True)
class ResolvConf:
    nameservers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()  # "name" or "name:value"
    notes: tuple[str, ...] = field(default=(), compare=False)  # what the kubelet dropped

    def render(self) -> str:
        lines = []
        if self.searches:
            lines.append("search " + " ".join(self.searches))
        lines += [f"nameserver {ns}" for ns in self.nameservers]
        if self.options:
            lines.append("options " + " ".join(self.options))
        return "\n".join(lines) + "\n"


def parse_resolv_conf(text: str) -> ResolvConf:
    """nameserver, search/domain (the last one wins, as in resolv.conf(5)) and options."""
    nameservers: list[str] = []
    searches: list[str] = []
    options: list[str] = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split(";", 1)[0].split()
        if not words:
            continue
        if words[0] == "nameserver" and len(words) > 1:
            nameservers.append(words[1])
        elif words[0] in ("search", "domain"):
            searches = words[1:]
        elif words[0] == "options":
            options += words[1:]
    return ResolvConf(tuple(nameservers), tuple(s.rstrip(".") for s in searches if s != "."),
                      tuple(options))


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _merge_options(base: list[str], pod: list[Obj]) -> list[str]:
    merged: dict[str, str | None] = {}
    for text in base:
        name, colon, value = text.partition(":")
        merged[name] = value if colon else None
    for option in pod:
        key = str(option.get("name") or "")
        if key:
            given = option.get("value")
            merged[key] = None if given is None else str(given)
    return [name if value is None else f"{name}:{value}" for name, value in merged.items()]


def pod_resolv_conf(pod: Obj, *, cluster_dns: list[str], cluster_domain: str,
                    host: ResolvConf) -> tuple[ResolvConf, bool]:
    """The pod's resolv.conf and whether ClusterFirst fell back for want of a cluster DNS."""
    spec = pod.get("spec") or {}
    policy = str(spec.get("dnsPolicy") or "ClusterFirst")
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    cluster = (policy == "ClusterFirstWithHostNet"
               or (policy == "ClusterFirst" and not spec.get("hostNetwork")))
    fell_back = cluster and not cluster_dns
    nameservers: list[str]
    searches: list[str]
    options: list[str]
    if policy == "None":
        nameservers, searches, options = [], [], []
    elif cluster and cluster_dns:
        domain = cluster_domain.strip(".")
        nameservers = list(cluster_dns)
        searches = _unique([f"{namespace}.svc.{domain}", f"svc.{domain}", domain,
                            *host.searches])
        options = ["ndots:5"]
    else:
        nameservers, searches, options = (list(host.nameservers), list(host.searches),
                                          list(host.options))
    config = spec.get("dnsConfig") or {}
    nameservers = _unique(nameservers + [str(n) for n in config.get("nameservers") or []])
    searches = _unique(searches + [str(s) for s in config.get("searches") or []])
    options = _merge_options(options, list(config.get("options") or []))
    notes = []
    if len(nameservers) > MAX_DNS_NAMESERVERS:
        notes.append(f"Nameserver limits were exceeded, some nameservers have been omitted, "
                     f"the applied nameserver line is: {' '.join(nameservers[:3])}")
    if len(searches) > MAX_DNS_SEARCH_PATHS:
        notes.append("Search Line limits were exceeded, some search paths have been omitted")
    return ResolvConf(tuple(nameservers[:MAX_DNS_NAMESERVERS]),
                      tuple(searches[:MAX_DNS_SEARCH_PATHS]), tuple(options),
                      tuple(notes)), fell_back
