"""The HTTP front's route table: which handler answers a path, looked up in order instead of
an if-chain. A route names one path, or every path under a prefix, optionally only with a
given number of segments or for given methods; the first route that matches answers.
Paths no route claims are API resource paths (`/api/v1/...`, `/apis/<group>/<version>/...`),
which `api_path` takes apart into a group/version and the rest.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from skiff.api import ApiError
from skiff.apiserver.endpoints.http import Request, Response

# A route's handler gets the request and its path without a trailing slash.
Handler = Callable[[Request, str], Awaitable[Response]]


@dataclass(frozen=True)
class Route:
    """`path` exactly, or (`prefix`) every path starting with it; `segments`: only paths of
    that many `/`-separated parts; `methods`: only those (empty: every method)."""

    path: str
    handler: Handler
    prefix: bool = False
    segments: int = 0
    methods: frozenset[str] = frozenset()

    def matches(self, path: str, method: str) -> bool:
        if self.methods and method not in self.methods:
            return False
        if self.segments and path.count("/") != self.segments:
            return False
        return path.startswith(self.path) if self.prefix else path == self.path


def find(routes: Sequence[Route], path: str, method: str) -> Handler | None:
    """The handler of the first route that matches, or None."""
    for route in routes:
        if route.matches(path, method):
            return route.handler
    return None


def api_path(path: str) -> tuple[str, list[str]]:
    """`/api/v1/<rest>` or `/apis/<group>/<version>/<rest>` as (group/version, rest);
    404 for any other path."""
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) >= 2:
        return parts[1], parts[2:]
    if parts[0] == "apis" and len(parts) >= 3:
        return f"{parts[1]}/{parts[2]}", parts[3:]
    raise ApiError.not_found("path", path)
