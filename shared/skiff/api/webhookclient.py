"""The rules of a webhook's `clientConfig`, which admission webhook configurations and a
CRD's conversion webhook share, as Kubernetes shares them
(`k8s.io/apiserver/pkg/util/webhook/validation.go`): an https URL with a host and no user
information, fragment or query, or a Service reference with a name, a namespace, a valid
port and a path of DNS-subdomain segments."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from skiff.api.errors import FieldError, invalid, required
from skiff.api.fieldchecks import is_int
from skiff.api.selectors import dns1123_subdomain_problems
from skiff.api.types import ObjView

_URL_FORM = "; desired format: https://host[/path]"


def validate_webhook_url(url: Any, path: str) -> list[FieldError]:
    """`ValidateWebhookURL` with https forced."""
    if not isinstance(url, str):
        return [invalid(path, url, "must be a string")]
    try:
        parts = urlsplit(url)
    except ValueError as err:
        return [required(path, f"url must be a valid URL: {err}{_URL_FORM}")]
    userinfo, _, host = parts.netloc.rpartition("@")
    errors: list[FieldError] = []
    if parts.scheme != "https":
        errors.append(invalid(path, parts.scheme,
                              f"'https' is the only allowed URL scheme{_URL_FORM}"))
    if not host:
        errors.append(invalid(path, host, f"host must be specified{_URL_FORM}"))
    if userinfo:
        errors.append(invalid(path, userinfo, "user information is not permitted in the URL"))
    if parts.fragment:
        errors.append(invalid(path, parts.fragment, "fragments are not permitted in the URL"))
    if parts.query:
        errors.append(invalid(path, parts.query, "query parameters are not permitted in the URL"))
    return errors


def validate_webhook_service(service: ObjView, path: str) -> list[FieldError]:
    """`ValidateWebhookService`."""
    errors = []
    if not service.get("name"):
        errors.append(required(f"{path}.name"))
    if not service.get("namespace"):
        errors.append(required(f"{path}.namespace"))
    port = service.get("port", 443)
    if not is_int(port) or not 1 <= port <= 65535:
        errors.append(invalid(f"{path}.port", port,
                              "port is not valid: must be between 1 and 65535, inclusive"))
    url_path = service.get("path")
    if url_path is None or url_path in ("", "/"):
        return errors
    if not isinstance(url_path, str):
        return errors + [invalid(f"{path}.path", url_path, "must be a string")]
    if url_path == "//":
        return errors + [invalid(f"{path}.path", url_path, "segment[0] may not be empty")]
    if not url_path.startswith("/"):
        errors.append(invalid(f"{path}.path", url_path, "must start with a '/'"))
    steps = url_path[1:].removesuffix("/").split("/")
    for i, step in enumerate(steps):
        if not step:
            errors.append(invalid(f"{path}.path", url_path, f"segment[{i}] may not be empty"))
            continue
        errors += [invalid(f"{path}.path", url_path, f"segment[{i}]: {p}")
                   for p in dns1123_subdomain_problems(step)]
    return errors
