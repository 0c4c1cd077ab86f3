"""Service environment variables (SPEC AX7), as the kubelet makes them at container start.

For every Service of the pod's namespace that has a cluster IP (when the pod's
`enableServiceLinks` is not false), and always for `default/kubernetes`, the container gets
`<NAME>_SERVICE_HOST`, `<NAME>_SERVICE_PORT`, `<NAME>_SERVICE_PORT_<PORTNAME>` and the
docker-link style `<NAME>_PORT`, `<NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]` (NAME
upper-cased, `-` → `_`). They come before `envFrom` and `env`, which override them. Only
Services that exist when the container starts are listed (as in Kubernetes).
"""

from __future__ import annotations

from skiff.api.types import Obj

__all__ = ["service_env"]

MASTER_NAMESPACE = "default"
MASTER_SERVICE = "kubernetes"


def _has_ip(service: Obj) -> bool:
    ip = (service.get("spec") or {}).get("clusterIP")
    return bool(ip) and ip != "None"


def _one(service: Obj) -> dict[str, str]:
    spec = service.get("spec") or {}
    name = str(service["metadata"]["name"]).upper().replace("-", "_")
    host = str(spec["clusterIP"])
    ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
    env = {f"{name}_SERVICE_HOST": host}
    if not ports:
        return env
    env[f"{name}_SERVICE_PORT"] = str(ports[0].get("port"))
    for port in ports:
        if port.get("name"):
            env[f"{name}_SERVICE_PORT_{str(port['name']).upper().replace('-', '_')}"] = str(
                port.get("port"))
    first = ports[0]
    env[f"{name}_PORT"] = (f"{str(first.get('protocol') or 'TCP').lower()}://{host}:"
                           f"{first.get('port')}")
    for port in ports:
        protocol = str(port.get("protocol") or "TCP")
        prefix = f"{name}_PORT_{port.get('port')}_{protocol.upper()}"
        env[prefix] = f"{protocol.lower()}://{host}:{port.get('port')}"
        env[f"{prefix}_PROTO"] = protocol.lower()
        env[f"{prefix}_PORT"] = str(port.get("port"))
        env[f"{prefix}_ADDR"] = host
    return env


def service_env(pod: Obj, namespace_services: list[Obj],
                kubernetes: Obj | None) -> dict[str, str]:
    """The variables for `pod` from the Services of its namespace and `default/kubernetes`."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    links = (pod.get("spec") or {}).get("enableServiceLinks") is not False
    chosen: dict[str, Obj] = {}
    if links:
        for service in namespace_services:
            if (service.get("metadata") or {}).get("namespace", namespace) == namespace:
                chosen[str(service["metadata"]["name"])] = service
    if namespace != MASTER_NAMESPACE or MASTER_SERVICE not in chosen:
        if kubernetes is not None:
            chosen[MASTER_SERVICE] = kubernetes
    env: dict[str, str] = {}
    for name in sorted(chosen):
        if _has_ip(chosen[name]):
            env.update(_one(chosen[name]))
    return env
