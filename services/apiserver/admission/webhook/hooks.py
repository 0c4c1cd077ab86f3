"""The webhooks of the stored configurations, as the admission plugins use them (Kubernetes'
`webhook.WebhookAccessor`): each hook of a Mutating/ValidatingWebhookConfiguration with its
selectors parsed once, in Kubernetes' order — configurations sorted by name, then each
configuration's webhooks in their order — and a uid (configuration name and position) by
which re-invocation tells hooks apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skiff.api.bytesfields import decode_bytes
from skiff.api.errors import ApiError, Reason
from skiff.api.selectors import LabelSelector
from skiff.api.types import Obj, ObjView


@dataclass(frozen=True)
class ServiceRef:
    """`clientConfig.service`: the Service the webhook is reached through."""

    namespace: str
    name: str
    path: str = ""
    port: int = 443


@dataclass(frozen=True)
class Hook:
    """One webhook of a configuration, with v1 defaults applied (the stored object has them;
    an object written before they existed is read the same way)."""

    configuration: str
    uid: str
    name: str
    mutating: bool
    rules: tuple[ObjView, ...] = ()
    failure_policy: str = "Fail"
    match_policy: str = "Equivalent"
    namespace_selector: LabelSelector = field(default_factory=LabelSelector.everything)
    object_selector: LabelSelector = field(default_factory=LabelSelector.everything)
    side_effects: str | None = None
    timeout_seconds: int = 10
    reinvocation_policy: str = "Never"
    url: str | None = None
    service: ServiceRef | None = None
    ca_bundle: bytes = b""
    match_conditions: tuple[tuple[str, str], ...] = ()  # (name, expression)
    review_versions: tuple[str, ...] = ("v1",)
    # a selector that cannot be parsed: every matching request is refused (InternalError)
    selector_error: ApiError | None = None

    @property
    def ignores_failures(self) -> bool:
        return self.failure_policy == "Ignore"


def _selector(value: Any, path: str) -> LabelSelector:
    return LabelSelector.from_dict(value if isinstance(value, Mapping) else {}, path=path)


def hook_of(configuration: str, index: int, raw: ObjView, *, mutating: bool) -> Hook:
    """The accessor for `webhooks[index]` of the configuration named `configuration`."""
    config = raw.get("clientConfig") if isinstance(raw.get("clientConfig"), Mapping) else {}
    assert isinstance(config, Mapping)
    service = None
    svc = config.get("service")
    if isinstance(svc, Mapping):
        service = ServiceRef(str(svc.get("namespace") or ""), str(svc.get("name") or ""),
                             str(svc.get("path") or ""), int(svc.get("port") or 443))
    error = None
    try:
        ns_sel = _selector(raw.get("namespaceSelector"), "namespaceSelector")
        obj_sel = _selector(raw.get("objectSelector"), "objectSelector")
    except ApiError as err:
        ns_sel = obj_sel = LabelSelector.everything()
        error = ApiError(Reason.INTERNAL_ERROR, f"Internal error occurred: {err.message}")
    timeout = raw.get("timeoutSeconds")
    return Hook(
        configuration=configuration, uid=f"{configuration}/{index}",
        name=str(raw.get("name") or ""), mutating=mutating,
        rules=tuple(r for r in raw.get("rules") or [] if isinstance(r, Mapping)),
        failure_policy=str(raw.get("failurePolicy") or "Fail"),
        match_policy=str(raw.get("matchPolicy") or "Equivalent"),
        namespace_selector=ns_sel, object_selector=obj_sel,
        side_effects=raw.get("sideEffects"),
        timeout_seconds=timeout if isinstance(timeout, int) and timeout > 0 else 10,
        reinvocation_policy=str(raw.get("reinvocationPolicy") or "Never"),
        url=config.get("url"), service=service, ca_bundle=decode_bytes(config.get("caBundle")),
        match_conditions=tuple((str(c.get("name", "")), str(c.get("expression", "")))
                               for c in raw.get("matchConditions") or []
                               if isinstance(c, Mapping)),
        review_versions=tuple(raw.get("admissionReviewVersions") or ("v1",)),
        selector_error=error)


def hooks_of(configurations: Iterable[Obj], *, mutating: bool) -> list[Hook]:
    """Every webhook of `configurations` in the order Kubernetes calls them."""
    hooks = []
    for config in sorted(configurations, key=lambda c: str(c["metadata"]["name"])):
        name = str(config["metadata"]["name"])
        for i, raw in enumerate(config.get("webhooks") or []):
            if isinstance(raw, Mapping):
                hooks.append(hook_of(name, i, raw, mutating=mutating))
    return hooks
