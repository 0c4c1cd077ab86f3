"""The admission chain: an ordered list of plugins, every mutating hook (`admit`) in order
first, then every validating hook (`validate`), as kube-apiserver runs its chain.

`default_chain` builds Skiff's plugins in kube-apiserver's default order (its
AllOrderedPlugins, cut to the plugins Skiff has): NamespaceLifecycle, LimitRanger,
ServiceAccount, NodeRestriction, Priority, DefaultTolerationSeconds, DefaultStorageClass,
PodSecurity, ResourceQuota. Mutating webhooks will go before PodSecurity's validation,
validating webhooks before ResourceQuota, which stays last.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from skiff.apiserver.admission.interface import Attributes, Plugin
from skiff.apiserver.admission.limitranger import LimitRanger
from skiff.apiserver.admission.namespacelifecycle import NamespaceLifecycle
from skiff.apiserver.admission.noderestriction import NodeRestriction
from skiff.apiserver.admission.podsecurity import PodSecurity, PodSecurityAdmission
from skiff.apiserver.admission.priority import Priority
from skiff.apiserver.admission.resourcequota import QuotaAdmission, ResourceQuota
from skiff.apiserver.admission.serviceaccount import GetServiceAccount, ServiceAccount
from skiff.apiserver.admission.storageclass import DefaultStorageClass
from skiff.apiserver.admission.tolerations import AdmissionConfig, DefaultTolerationSeconds
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup


class Chain:
    """Plugins run in order: `admit` (mutating) for all, then `validate` for all."""

    def __init__(self, plugins: Sequence[Plugin]) -> None:
        self.plugins = list(plugins)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.plugins]

    async def admit(self, attrs: Attributes) -> list[str]:
        """The mutating pass; the plugins' warnings."""
        warnings: list[str] = []
        for plugin in self.plugins:
            warnings += await plugin.admit(attrs)
        return warnings

    async def validate(self, attrs: Attributes) -> list[str]:
        """The validating pass; the plugins' warnings."""
        warnings: list[str] = []
        for plugin in self.plugins:
            warnings += await plugin.validate(attrs)
        return warnings


@dataclass(frozen=True)
class Sources:
    """What the plugins read: the registry's watch-fed lookups and storage."""

    storage: Storage
    namespaces: Lookup
    priority_classes: Lookup
    limit_ranges: Lookup
    get_service_account: GetServiceAccount


def default_chain(sources: Sources, *, tolerations: AdmissionConfig,
                  service_account: bool, pod_security: PodSecurityAdmission | None,
                  quota: QuotaAdmission) -> Chain:
    """Skiff's plugins in kube-apiserver's order; ServiceAccount and PodSecurity only when
    turned on (`--disable-admission-plugins`, the AdmissionConfiguration)."""
    plugins: list[Plugin | None] = [
        NamespaceLifecycle(sources.namespaces),
        LimitRanger(sources.limit_ranges),
        ServiceAccount(sources.get_service_account) if service_account else None,
        NodeRestriction(),
        Priority(sources.priority_classes, sources.storage),
        DefaultTolerationSeconds(tolerations),
        DefaultStorageClass(sources.storage),
        PodSecurity(pod_security) if pod_security is not None else None,
        ResourceQuota(quota),
    ]
    return Chain([p for p in plugins if p is not None])
