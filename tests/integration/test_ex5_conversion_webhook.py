"""SPEC EX5: a CRD with two versions and a conversion webhook. v1 (stored) writes the
schedule as `spec.cronSpec`, v2 as `spec.schedule`; the apiserver converts every object
between them through a real HTTPS ConversionReview server started here (its certificate
from a test CA, trusted through the CRD's `caBundle` only), on the way in, on the way out,
in lists and in watches; a webhook that is down makes the request fail with kube-apiserver's
message, and no object is stored half-converted."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes import client, config, watch

from skiff.cluster.processes import free_port
from tests.integration.httpsserver import HttpsServer
from tests.integration.kubectl import http_front, kubectl


class ConversionServer(HttpsServer):
    """/convert: v1 `cronSpec` <-> v2 `schedule`; every review it was sent is kept."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.reviews: list[dict[str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/convert", self._convert)

    async def _convert(self, request: web.Request) -> web.Response:
        review = await request.json()
        req = review["request"]
        self.reviews.append(req)
        desired = req["desiredAPIVersion"]
        converted = []
        for obj in req["objects"]:
            spec = dict(obj.get("spec") or {})
            if desired.endswith("/v2") and "cronSpec" in spec:
                spec["schedule"] = spec.pop("cronSpec")
            elif desired.endswith("/v1") and "schedule" in spec:
                spec["cronSpec"] = spec.pop("schedule")
            converted.append({**obj, "apiVersion": desired, "spec": spec})
        return web.json_response({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "response": {"uid": req["uid"], "result": {"status": "Success"},
                         "convertedObjects": converted}})


def _crd(group: str, server: ConversionServer, *, url: str | None = None) -> str:
    def version(name: str, field: str, storage: bool) -> dict[str, Any]:
        return {"name": name, "served": True, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}}}
    return json.dumps({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"crontabs.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                 "versions": [version("v1", "cronSpec", True),
                              version("v2", "schedule", False)],
                 "conversion": {"strategy": "Webhook", "webhook": {
                     "conversionReviewVersions": ["v1"],
                     "clientConfig": {"url": url or server.url("/convert"),
                                      "caBundle": server.ca_bundle}}}}})


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, ConversionServer]]:
    root = tmp_path_factory.mktemp("conversion")
    server = ConversionServer(root).start()
    try:
        with http_front(root / "cluster") as (_, _, kubeconfig):
            yield kubeconfig, server
    finally:
        server.stop()


def _ok(result: Any) -> str:
    assert result.returncode == 0, result.stderr
    return str(result.stdout)


def _setup(kubeconfig: Path, server: ConversionServer, **crd: Any) -> str:
    group = f"c{uuid.uuid4().hex[:8]}.example.com"
    _ok(kubectl(kubeconfig, "apply", "-f", "-", stdin=_crd(group, server, **crd)))
    _ok(kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=30s",
                f"crd/crontabs.{group}"))
    return group


def _raw(kubeconfig: Path, path: str) -> Any:
    return json.loads(_ok(kubectl(kubeconfig, "get", "--raw", path)))


def test_ex5_objects_are_converted_by_the_webhook_both_ways(
        front: tuple[Path, ConversionServer]) -> None:
    kubeconfig, server = front
    group = _setup(kubeconfig, server)
    base = f"/apis/{group}/%s/namespaces/default/crontabs"
    with config.new_client_from_config(config_file=str(kubeconfig)) as api:
        custom = client.CustomObjectsApi(api)
        start = custom.list_namespaced_custom_object(group, "v2", "default", "crontabs")
        assert isinstance(start, dict)
        custom.create_namespaced_custom_object(group, "v2", "default", "crontabs", {
            "apiVersion": f"{group}/v2", "kind": "CronTab",
            "metadata": {"name": "nightly", "labels": {"made": "v2"}},
            "spec": {"schedule": "0 3 * * *"}})
        stored = _raw(kubeconfig, base % "v1" + "/nightly")
        assert stored["apiVersion"] == f"{group}/v1"
        assert stored["spec"] == {"cronSpec": "0 3 * * *"}
        assert stored["metadata"]["labels"] == {"made": "v2"}
        as_v2 = _raw(kubeconfig, base % "v2" + "/nightly")
        assert as_v2["apiVersion"] == f"{group}/v2"
        assert as_v2["spec"] == {"schedule": "0 3 * * *"}
        assert as_v2["metadata"]["uid"] == stored["metadata"]["uid"]
        listed = _raw(kubeconfig, base % "v2")
        assert [o["spec"] for o in listed["items"]] == [{"schedule": "0 3 * * *"}]
        events = watch.Watch().stream(custom.list_namespaced_custom_object, group, "v2",
                                      "default", "crontabs",
                                      resource_version=start["metadata"]["resourceVersion"],
                                      timeout_seconds=5)
        first = next(iter(events))
        assert first["type"] == "ADDED" and first["object"]["spec"] == {
            "schedule": "0 3 * * *"}
    assert {r["desiredAPIVersion"] for r in server.reviews} == {f"{group}/v1",
                                                                  f"{group}/v2"}


def test_ex5_a_conversion_webhook_that_is_down_fails_the_request(
        front: tuple[Path, ConversionServer]) -> None:
    kubeconfig, server = front
    down = f"https://127.0.0.1:{free_port()}/convert"  # nothing listens there
    group = _setup(kubeconfig, server, url=down)
    obj = json.dumps({"apiVersion": f"{group}/v2", "kind": "CronTab",
                      "metadata": {"name": "lost", "namespace": "default"},
                      "spec": {"schedule": "* * * * *"}})
    refused = kubectl(kubeconfig, "create", "-f", "-", stdin=obj)
    assert refused.returncode != 0
    assert f"conversion webhook for {group}/CronTab failed" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    listed = _raw(kubeconfig, f"/apis/{group}/v1/namespaces/default/crontabs")
    assert listed["items"] == []  # nothing stored
