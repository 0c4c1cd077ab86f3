"""`/healthz`, `/livez` and `/readyz` as kube-apiserver answers them.

A load balancer in front of several apiservers, `kubectl get --raw '/readyz?verbose'` and
the compose health checks read these: an apiserver whose watch cache has lost etcd (no
quorum) or that is shutting down must say so here, as its gRPC health already does, or a
front keeps sending it requests it cannot serve. Each endpoint runs named checks: `ok` when
all pass, `[+]name ok` / `[-]name failed: reason withheld` lines with `?verbose` or when one
fails (HTTP 500), `?exclude=name` to skip one, `/readyz/<name>` for one alone.
"""

from __future__ import annotations

from skiff.apiserver.endpoints.http import Response

# check name -> the endpoints that run it (Kubernetes' names; etcd-readiness and shutdown
# are readiness only: a live process that cannot reach etcd is not restarted for it).
_CHECKS = {"ping": ("healthz", "livez", "readyz"), "log": ("healthz", "livez", "readyz"),
           "etcd": ("healthz", "livez", "readyz"), "etcd-readiness": ("readyz",),
           "informer-sync": ("readyz",), "shutdown": ("readyz",)}
ENDPOINTS = ("healthz", "livez", "readyz")


class HealthChecks:
    """The current outcome of each check; the apiserver flips them as its state changes."""

    def __init__(self) -> None:
        self._ok = dict.fromkeys(_CHECKS, True)

    def set(self, name: str, ok: bool) -> None:
        if name not in self._ok:
            raise KeyError(name)
        self._ok[name] = ok

    def etcd(self, current: bool) -> None:
        """The watch cache's currency: etcd answered a quorum read in time, or not."""
        self._ok["etcd"] = self._ok["etcd-readiness"] = current

    def answer(self, endpoint: str, check: str, query: dict[str, str]) -> Response:
        """`/<endpoint>` (check "") or `/<endpoint>/<check>`."""
        names = [n for n, where in _CHECKS.items() if endpoint in where]
        if check:
            if check not in names:
                return Response(404, "404 page not found\n", content_type="text/plain")
            if self._ok[check]:
                return Response(200, "ok", content_type="text/plain")
            return Response(500, f"internal server error: {check} check failed\n",
                            content_type="text/plain")
        excluded = set(query.get("exclude", "").split(",")) - {""}
        lines, failed = [], False
        for name in names:
            if name in excluded:
                lines.append(f"[+]{name} excluded: ok")
                continue
            ok = self._ok[name]
            failed |= not ok
            lines.append(f"[+]{name} ok" if ok else f"[-]{name} failed: reason withheld")
        if failed:
            return Response(500, "\n".join([*lines, f"{endpoint} check failed", ""]),
                            content_type="text/plain")
        if "verbose" in query:
            return Response(200, "\n".join([*lines, f"{endpoint} check passed", ""]),
                            content_type="text/plain")
        return Response(200, "ok", content_type="text/plain")
