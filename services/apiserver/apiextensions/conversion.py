"""Converting custom objects between their CRD's versions (SPEC EX5), as
apiextensions-apiserver's `pkg/apiserver/conversion` does: strategy `None` rewrites the
apiVersion and nothing else; strategy `Webhook` POSTs a ConversionReview v1 with the objects
to the CRD's conversion webhook (over HTTPS with its caBundle, to its URL or Service, as
admission webhooks are called) and checks the answer — the same uid, `result.status`
Success, one converted object per object sent, each in the desired apiVersion with the
kind, name, namespace and uid it had (only labels and annotations of metadata may change;
kube-apiserver keeps the rest of the original's metadata). A failed conversion is a 500
naming the webhook's CRD, as kube-apiserver's is.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skiff.api import ApiError, Reason
from skiff.api.apiextensions import crdversions
from skiff.api.types import Obj, ObjView
from skiff.apiserver.admission.webhook.client import CallFailed, HttpsCaller
from skiff.apiserver.admission.webhook.hooks import ServiceRef

REVIEW = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"}
TIMEOUT_SECONDS = 30  # kube's conversion webhook timeout


@dataclass(frozen=True)
class ConversionHook:
    """The CRD's `spec.conversion.webhook.clientConfig`, as the HTTPS caller reads it."""

    url: str | None
    service: ServiceRef | None
    ca_bundle: bytes
    timeout_seconds: int = TIMEOUT_SECONDS


def _hook(crd: ObjView) -> ConversionHook | None:
    conversion = (crd.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") != "Webhook":
        return None
    config = (conversion.get("webhook") or {}).get("clientConfig") or {}
    svc = config.get("service")
    service = (ServiceRef(str(svc.get("namespace") or ""), str(svc.get("name") or ""),
                          str(svc.get("path") or ""), int(svc.get("port") or 443))
               if isinstance(svc, Mapping) else None)
    try:
        bundle = base64.b64decode(str(config.get("caBundle") or ""), validate=True)
    except (binascii.Error, ValueError):
        bundle = b""
    return ConversionHook(config.get("url"), service, bundle)


class CrdConverter:
    """One CRD's converter (made again whenever the CRD changes)."""

    def __init__(self, crd: ObjView, caller: HttpsCaller | None) -> None:
        spec = crd.get("spec") or {}
        self.group = str(spec.get("group", ""))
        self.kind = str((spec.get("names") or {}).get("kind", ""))
        self.several_versions = len(crdversions.served_versions(crd)) > 1 or (
            crdversions.storage_version(crd) not in crdversions.served_versions(crd))
        self._hook = _hook(crd)
        self._caller = caller

    async def convert(self, objs: list[Obj], api_version: str) -> list[Obj]:
        todo = [i for i, obj in enumerate(objs) if obj.get("apiVersion") != api_version]
        if not todo:
            return objs
        if self._hook is None:  # strategy None
            converted = [{**objs[i], "apiVersion": api_version} for i in todo]
        else:
            converted = await self._webhook([objs[i] for i in todo], api_version)
        out = list(objs)
        for i, obj in zip(todo, converted, strict=True):
            out[i] = obj
        return out

    def _failed(self, why: str) -> ApiError:
        return ApiError(Reason.INTERNAL_ERROR,
                        f"conversion webhook for {self.group}/{self.kind} failed: {why}")

    async def _webhook(self, objs: list[Obj], api_version: str) -> list[Obj]:
        assert self._hook is not None
        if self._caller is None:
            raise self._failed("no conversion webhook client is configured")
        uid = str(uuid.uuid4())
        review = {**REVIEW, "request": {"uid": uid, "desiredAPIVersion": api_version,
                                        "objects": objs}}
        try:
            answer = await self._caller(self._hook, review)
        except CallFailed as err:
            raise self._failed(str(err)) from None
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict):
            raise self._failed("the ConversionReview it returned has no response")
        if response.get("uid") != uid:
            raise self._failed(f"expected response uid {uid!r}, got {response.get('uid')!r}")
        result = response.get("result") or {}
        if result.get("status") != "Success":
            raise self._failed(str(result.get("message") or "the webhook did not succeed"))
        converted = response.get("convertedObjects")
        if not isinstance(converted, list) or len(converted) != len(objs):
            raise self._failed(f"expected {len(objs)} converted objects, got "
                               f"{len(converted) if isinstance(converted, list) else 0}")
        return [self._checked(original, new, api_version)
                for original, new in zip(objs, converted, strict=True)]

    def _checked(self, original: Obj, new: Any, api_version: str) -> Obj:
        if not isinstance(new, dict):
            raise self._failed("a converted object is not an object")
        if new.get("apiVersion") != api_version:
            raise self._failed(f"invalid converted object: expected apiVersion "
                               f"{api_version!r}, got {new.get('apiVersion')!r}")
        if new.get("kind") != original.get("kind"):
            raise self._failed(f"invalid converted object: expected kind "
                               f"{original.get('kind')!r}, got {new.get('kind')!r}")
        meta = dict(original.get("metadata") or {})
        new_meta = new.get("metadata") or {}
        for key in ("name", "namespace", "uid"):
            if new_meta.get(key) != meta.get(key):
                raise self._failed(f"invalid metadata.{key} in the converted object")
        for key in ("labels", "annotations"):  # the only metadata a webhook may change
            if key in new_meta:
                meta[key] = new_meta[key]
            else:
                meta.pop(key, None)
        return {**new, "metadata": meta}
