"""The admission chain: an ordered list of plugins, every mutating hook (`admit`) in order
first, then every validating hook (`validate`), as kube-apiserver runs its chain.

`default_chain` builds Skiff's plugins in kube-apiserver's default order (its
AllOrderedPlugins, cut to the plugins Skiff has): NamespaceLifecycle, LimitRanger,
ServiceAccount, NodeRestriction, Priority, DefaultTolerationSeconds, DefaultStorageClass,
PodSecurity, MutatingAdmissionWebhook, ValidatingAdmissionPolicy,
ValidatingAdmissionWebhook, ResourceQuota — the webhooks last of the mutating and of the
validating plugins but ResourceQuota, the policies between them, as kube-apiserver orders
them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from skiff.api.podsecurity import PodSecurityConfig
from skiff.apiserver.admission.interface import Attributes, Plugin
from skiff.apiserver.admission.limitranger import LimitRanger
from skiff.apiserver.admission.namespacelifecycle import NamespaceLifecycle
from skiff.apiserver.admission.noderestriction import NodeRestriction
from skiff.apiserver.admission.podsecurity import PodSecurity, PodSecurityAdmission
from skiff.apiserver.admission.policy import (
    ParamSource,
    PolicySource,
    PolicyStatus,
    ValidatingAdmissionPolicyAdmission,
)
from skiff.apiserver.admission.priority import Priority
from skiff.apiserver.admission.resourcequota import QuotaAdmission, ResourceQuota
from skiff.apiserver.admission.serviceaccount import GetServiceAccount, ServiceAccount
from skiff.apiserver.admission.storageclass import DefaultStorageClass
from skiff.apiserver.admission.tolerations import AdmissionConfig, DefaultTolerationSeconds
from skiff.apiserver.admission.webhook import (
    HttpsCaller,
    MutatingWebhookAdmission,
    ServiceResolver,
    ValidatingWebhookAdmission,
    WebhookSource,
)
from skiff.apiserver.storage.interface import Storage
from skiff.apiserver.storage.lookups import Lookup
from skiff.apiserver.storage.watchcache import WatchCache


class Chain:
    """Plugins run in order: `admit` (mutating) for all, then `validate` for all — each
    plugin only for the operations it handles."""

    def __init__(self, plugins: Sequence[Plugin]) -> None:
        self.plugins = list(plugins)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.plugins]

    async def admit(self, attrs: Attributes) -> list[str]:
        """The mutating pass; the plugins' warnings."""
        warnings: list[str] = []
        for plugin in self.plugins:
            if attrs.operation in plugin.operations:
                warnings += await plugin.admit(attrs)
        return warnings

    async def validate(self, attrs: Attributes) -> list[str]:
        """The validating pass; the plugins' warnings."""
        warnings: list[str] = []
        for plugin in self.plugins:
            if attrs.operation in plugin.operations:
                warnings += await plugin.validate(attrs)
        return warnings


class Sources:
    """What the plugins read: storage and the watch-fed lookups (as Kubernetes' plugins
    read informers), which `run` keeps current."""

    def __init__(self, storage: Storage, cache: WatchCache) -> None:
        self.storage = storage
        self.namespaces = Lookup("namespaces", storage, cache)
        self.priority_classes = Lookup("priorityclasses", storage, cache)
        self.service_accounts = Lookup("serviceaccounts", storage, cache)
        self.limit_ranges = Lookup("limitranges", storage, cache)
        self.quota = QuotaAdmission(storage, cache)
        self.mutating_webhooks = Lookup("mutatingwebhookconfigurations", storage, cache)
        self.validating_webhooks = Lookup("validatingwebhookconfigurations", storage, cache)
        self.policies = Lookup("validatingadmissionpolicies", storage, cache)
        self.policy_bindings = Lookup("validatingadmissionpolicybindings", storage, cache)
        self.params = ParamSource(storage, cache)  # a lookup per paramKind, once used

    async def run(self) -> None:
        """Keep the lookups current (a task beside the watch cache)."""
        async with asyncio.TaskGroup() as tg:
            tg.create_task(self.namespaces.run(), name="lookup-namespaces")
            tg.create_task(self.priority_classes.run(), name="lookup-priorityclasses")
            tg.create_task(self.service_accounts.run(), name="lookup-serviceaccounts")
            tg.create_task(self.limit_ranges.run(), name="lookup-limitranges")
            tg.create_task(self.quota.quotas.run(), name="lookup-resourcequotas")
            tg.create_task(self.mutating_webhooks.run(),
                           name="lookup-mutatingwebhookconfigurations")
            tg.create_task(self.validating_webhooks.run(),
                           name="lookup-validatingwebhookconfigurations")
            tg.create_task(self.policies.run(), name="lookup-validatingadmissionpolicies")
            tg.create_task(self.policy_bindings.run(),
                           name="lookup-validatingadmissionpolicybindings")
            tg.create_task(self.params.run(), name="lookup-policy-params")
            tg.create_task(PolicyStatus(self.storage, self.policies).run(),
                           name="policy-status")


def default_chain(sources: Sources, *, tolerations: AdmissionConfig,
                  service_account: GetServiceAccount | None,
                  pod_security: PodSecurityConfig | None) -> Chain:
    """Skiff's plugins in kube-apiserver's order; ServiceAccount (given the accounts'
    getter) and PodSecurity (given its configuration) only when turned on
    (`--disable-admission-plugins`, the AdmissionConfiguration)."""
    caller = HttpsCaller(ServiceResolver(sources.storage))
    plugins: list[Plugin | None] = [
        NamespaceLifecycle(sources.namespaces),
        LimitRanger(sources.limit_ranges),
        ServiceAccount(service_account) if service_account is not None else None,
        NodeRestriction(),
        Priority(sources.priority_classes, sources.storage),
        DefaultTolerationSeconds(tolerations),
        DefaultStorageClass(sources.storage),
        PodSecurity(PodSecurityAdmission(config=pod_security, namespaces=sources.namespaces,
                                         storage=sources.storage))
        if pod_security is not None else None,
        MutatingWebhookAdmission(WebhookSource(sources.mutating_webhooks, mutating=True),
                                 namespaces=sources.namespaces, caller=caller),
        ValidatingAdmissionPolicyAdmission(
            PolicySource(sources.policies, sources.policy_bindings),
            namespaces=sources.namespaces, params=sources.params),
        ValidatingWebhookAdmission(WebhookSource(sources.validating_webhooks, mutating=False),
                                   namespaces=sources.namespaces, caller=caller),
        ResourceQuota(sources.quota),
    ]
    return Chain([p for p in plugins if p is not None])
