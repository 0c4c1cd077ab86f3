"""The admission webhook server the EX6 tests and the Helm webhook chart's test call: an
HTTPS AdmissionReview server (tests/integration/httpsserver.py) that labels objects by
JSON patch, refuses objects named `refused-*`, or answers slowly."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.integration.httpsserver import HttpsServer

SEEN_LABEL = "webhook.skiff.test/seen"
SERVICE_HOST = "webhook.ex6-svc.svc"  # the Service `webhook` of namespace ex6-svc


class WebhookServer(HttpsServer):
    """An HTTPS AdmissionReview server on 127.0.0.1 in a thread of its own (kubectl runs
    blocking in the test): /label adds a label by JSON patch, /deny refuses objects named
    `refused-*`, /slow answers after 3 s. Every request it was sent is kept."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, hosts=(SERVICE_HOST,))
        self.requests: list[dict[str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/label", self._label)
        app.router.add_post("/deny", self._deny)
        app.router.add_post("/slow", self._slow)

    async def _review(self, request: web.Request) -> dict[str, Any]:
        review: dict[str, Any] = await request.json()
        self.requests.append({**review["request"], "path": request.path,
                              "query": dict(request.query)})
        return dict(review["request"])

    @staticmethod
    def _answer(req: dict[str, Any], **response: Any) -> web.Response:
        return web.json_response({"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview",
                                  "response": {"uid": req["uid"], **response}})

    async def _label(self, request: web.Request) -> web.Response:
        req = await self._review(request)
        labels = (req["object"].get("metadata") or {}).get("labels")
        ops: list[dict[str, Any]] = [] if labels else [
            {"op": "add", "path": "/metadata/labels", "value": {}}]
        ops.append({"op": "add", "path": "/metadata/labels/" + SEEN_LABEL.replace("/", "~1"),
                    "value": "yes"})
        patch = base64.b64encode(json.dumps(ops).encode()).decode()
        return self._answer(req, allowed=True, patchType="JSONPatch", patch=patch,
                            warnings=["labelled by the test webhook"])

    async def _deny(self, request: web.Request) -> web.Response:
        req = await self._review(request)
        if str(req.get("name", "")).startswith("refused-"):
            return self._answer(req, allowed=False, status={
                "code": 403, "message": "objects named refused-* are not welcome"})
        return self._answer(req, allowed=True)

    async def _slow(self, request: web.Request) -> web.Response:
        req = await self._review(request)
        await asyncio.sleep(3)
        return self._answer(req, allowed=True)
