"""SPEC EX8: the aggregation layer end to end — a real apiserver and etcd over TLS, and a
real extension apiserver started here (HTTPS, its certificate for
`metrics-ext.ex8.svc` from a test CA trusted through the APIService's `caBundle` only; it
demands the apiserver's front-proxy client certificate, from a CA of its own, as
extension apiservers do). The real `kubectl` registers it from YAML, discovers its group,
reads through the apiserver, and sees the APIService turn unavailable (and requests 503)
when the backend stops. Availability checks run every second here."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from aiohttp import web

from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.security import ClusterSecurity
from skiff.pki import CertificateAuthority
from tests.integration.auth.conftest import SecureCluster, start_secure_cluster
from tests.integration.httpsserver import HttpsServer
from tests.integration.kubectl import kubectl
from tests.integration.officialclient import present

GROUP, VERSION = "metrics.example.com", "v1beta1"
GV = f"{GROUP}/{VERSION}"
WRONG_CA_GV = "wrongca.example.com/v1"  # registered with a caBundle of another CA
SERVICE_HOST = "metrics-ext.ex8.svc"
NAME_OF_TRUST = "extension-apiserver-authentication"  # the Service `metrics-ext` of namespace ex8
PROXY_CLIENT = "front-proxy-client"


class ExtensionServer(HttpsServer):
    """An extension apiserver on 127.0.0.1 in a thread of its own: discovery of
    `metrics.example.com/v1beta1` (one resource, `widgets`), a list of widgets named after
    the user the front-proxy headers carry, and `/echo` with what it was sent."""

    def __init__(self, directory: Path, front_proxy_ca: Path) -> None:
        super().__init__(directory, hosts=(SERVICE_HOST,), common_name="metrics-ext",
                         client_ca=front_proxy_ca)  # only the front proxy gets in
        self.seen: list[dict[str, Any]] = []

    def routes(self, app: web.Application) -> None:
        app.router.add_get(f"/apis/{GV}", self._discovery)
        app.router.add_get(f"/apis/{GV}/namespaces/{{namespace}}/widgets", self._widgets)
        app.router.add_get(f"/apis/{GV}/widgets", self._widgets)
        app.router.add_route("*", f"/apis/{GV}/echo", self._echo)
        app.router.add_get(f"/openapi/v3/apis/{GV}", self._openapi)
        app.router.add_get(f"/apis/{GV}/compressed", self._compressed)
        app.router.add_get(f"/apis/{WRONG_CA_GV}", self._discovery)

    def _record(self, request: web.Request, body: bytes = b"") -> dict[str, Any]:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        subject = dict(x[0] for x in (peer or {}).get("subject", ()))
        entry = {"path": request.path, "method": request.method,
                 "query": dict(request.query), "body": body.decode(),
                 "user": request.headers.get("X-Remote-User"),
                 "groups": request.headers.getall("X-Remote-Group", []),
                 "authorization": request.headers.get("Authorization"),
                 "client_cn": subject.get("commonName")}
        self.seen.append(entry)
        return entry

    async def _discovery(self, request: web.Request) -> web.Response:
        self._record(request)
        return web.json_response({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GV,
            "resources": [{"name": "widgets", "singularName": "widget", "namespaced": True,
                           "kind": "Widget", "verbs": ["get", "list", "watch"]}]})

    async def _widgets(self, request: web.Request) -> web.StreamResponse:
        entry = self._record(request)
        namespace = request.match_info.get("namespace", "default")
        widget = {"apiVersion": GV, "kind": "Widget",
                  "metadata": {"name": f"seen-by-{entry['user']}", "namespace": namespace,
                               "creationTimestamp": "2026-01-01T00:00:00Z"},
                  "groups": entry["groups"]}
        if request.query.get("watch") in ("true", "1"):
            out = web.StreamResponse(headers={"Content-Type": "application/json"})
            await out.prepare(request)
            for name in ("first", "second"):
                event = {"type": "ADDED", "object": {
                    **widget, "metadata": {**widget["metadata"], "name": name}}}
                await out.write(json.dumps(event).encode() + b"\n")
                await asyncio.sleep(0.2)
            await out.write_eof()
            return out
        return web.json_response({"apiVersion": GV, "kind": "WidgetList",
                                  "metadata": {"resourceVersion": "1"}, "items": [widget]})

    async def _openapi(self, request: web.Request) -> web.Response:
        self._record(request)
        gvk = {"group": GROUP, "version": VERSION, "kind": "Widget"}
        ok = {"description": "OK", "content": {"application/json": {"schema": {
            "$ref": "#/components/schemas/com.example.metrics.v1beta1.Widget"}}}}
        base = f"/apis/{GV}/namespaces/{{namespace}}/widgets"
        paths = {base: {"get": {"operationId": "listWidget", "x-kubernetes-action": "list",
                                "x-kubernetes-group-version-kind": gvk,
                                "responses": {"200": ok}}},
                 base + "/{name}": {"get": {"operationId": "readWidget",
                                            "x-kubernetes-action": "get",
                                            "x-kubernetes-group-version-kind": gvk,
                                            "responses": {"200": ok}}}}
        return web.json_response({
            "openapi": "3.0.0", "info": {"title": "metrics-ext", "version": VERSION},
            "paths": paths, "components": {"schemas": {"com.example.metrics.v1beta1.Widget": {
                "type": "object", "description": "A widget the test extension serves.",
                "properties": {
                    "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "groups": {"type": "array", "items": {"type": "string"},
                               "description": "The groups the front proxy named."}},
                "x-kubernetes-group-version-kind": [
                    {"group": GROUP, "kind": "Widget", "version": VERSION}]}}}})

    async def _compressed(self, request: web.Request) -> web.Response:
        """Gzip whenever the caller accepts it, as Go servers behind a gzip filter do."""
        entry = self._record(request)
        response = web.json_response({"kind": "Status", "apiVersion": "v1",
                                      "status": "Success", "message": "x" * 4096,
                                      "details": {"name": str(entry["user"])}})
        response.enable_compression()
        return response

    async def _echo(self, request: web.Request) -> web.Response:
        entry = self._record(request, await request.read())
        return web.json_response(entry, status=201 if request.method == "POST" else 200)


@pytest.fixture(scope="module")
def aggregated(tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[SecureCluster, Path, ExtensionServer]]:
    root = tmp_path_factory.mktemp("ex8")
    front_proxy = CertificateAuthority.load_or_create(root / "front-proxy-ca")
    client = front_proxy.issue(root / "front-proxy-client", common_name=PROXY_CLIENT,
                               client=True)
    server = ExtensionServer(root / "extension", front_proxy.files.cert).start()
    try:
        with start_secure_cluster(root / "cluster", apiserver_args=(
                "--proxy-client-cert-file", str(client.cert),
                "--proxy-client-key-file", str(client.key),
                "--requestheader-client-ca-file", str(front_proxy.files.cert),
                "--requestheader-allowed-names", PROXY_CLIENT,
                "--apiservice-availability-check-interval", "1")) as cluster:
            config = write_kubeconfig(root, cluster.https,
                                      security=ClusterSecurity(cluster.pki))
            _register(config, server)
            yield cluster, config, server
    finally:
        server.stop()


def _ok(config: Path, *args: str, stdin: str | None = None) -> str:
    done = kubectl(config, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _register(config: Path, server: ExtensionServer) -> None:
    """The extension as a user installs one: a Service without selector and its
    EndpointSlice, and the APIService, from YAML."""
    _ok(config, "create", "namespace", "ex8")
    _ok(config, "apply", "-f", "-", stdin=f"""
apiVersion: v1
kind: Service
metadata: {{name: metrics-ext, namespace: ex8}}
spec:
  ports: [{{name: https, port: 443, targetPort: {server.port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: metrics-ext-1
  namespace: ex8
  labels: {{kubernetes.io/service-name: metrics-ext}}
addressType: IPv4
endpoints: [{{addresses: ["127.0.0.1"], conditions: {{ready: true}}}}]
ports: [{{name: https, port: {server.port}, protocol: TCP}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: {VERSION}.{GROUP}
spec:
  group: {GROUP}
  version: {VERSION}
  groupPriorityMinimum: 100
  versionPriority: 100
  caBundle: {server.ca_bundle}
  service:
    namespace: ex8
    name: metrics-ext
""")


def _available(config: Path) -> dict[str, Any]:
    stored = json.loads(_ok(config, "get", "apiservice", f"{VERSION}.{GROUP}", "-o", "json"))
    return next((c for c in (stored.get("status") or {}).get("conditions") or []
                 if c["type"] == "Available"), {})


def _until_available(config: Path, status: str, *, within: float = 8.0) -> dict[str, Any]:
    deadline = time.monotonic() + within
    while (condition := _available(config)).get("status") != status:
        assert time.monotonic() < deadline, f"never Available={status}: {condition}"
        time.sleep(0.3)
    return condition


def test_ex8_an_apiservice_from_yaml_is_defaulted_listed_and_available(
        aggregated: tuple[SecureCluster, Path, ExtensionServer]) -> None:
    _, config, _ = aggregated
    stored = json.loads(_ok(config, "get", "apiservice", f"{VERSION}.{GROUP}", "-o", "json"))
    assert stored["spec"]["service"] == {"namespace": "ex8", "name": "metrics-ext",
                                         "port": 443}
    condition = _until_available(config, "True")
    assert (condition["reason"], condition["message"]) == ("Passed", "all checks passed")
    table = _ok(config, "get", "apiservices")
    row = next(line.split() for line in table.splitlines()
               if line.startswith(f"{VERSION}.{GROUP}"))
    assert row[1:3] == ["ex8/metrics-ext", "True"]
    # the groups kube-apiserver serves itself, as kube lists them
    local = next(line.split() for line in table.splitlines() if line.startswith("v1.apps "))
    assert local[1:3] == ["Local", "True"]
    assert any(line.startswith("v1. ") for line in table.splitlines())


def test_ex8_requests_are_proxied_with_the_user_in_front_proxy_headers(
        aggregated: tuple[SecureCluster, Path, ExtensionServer]) -> None:
    _, config, server = aggregated
    _until_available(config, "True")
    listed = json.loads(_ok(config, "get", "--raw",
                            f"/apis/{GV}/namespaces/default/widgets?limit=5"))
    assert [w["metadata"]["name"] for w in listed["items"]] == ["seen-by-kubernetes-admin"]
    assert "system:masters" in listed["items"][0]["groups"]
    sent = [s for s in server.seen if s["path"].endswith("/namespaces/default/widgets")][-1]
    assert sent["query"] == {"limit": "5"}
    assert sent["authorization"] is None  # the client's credentials stay here
    assert sent["client_cn"] == PROXY_CLIENT  # the apiserver's proxy certificate
    compressed = json.loads(_ok(config, "get", "--raw", f"/apis/{GV}/compressed"))
    assert compressed["details"] == {"name": "kubernetes-admin"}  # arrived decoded
    echoed = json.loads(_ok(config, "create", "--raw", f"/apis/{GV}/echo", "-f", "-",
                            stdin='{"hello": "backend"}'))
    assert (echoed["method"], json.loads(echoed["body"])) == ("POST", {"hello": "backend"})


def test_ex8_kubectl_discovers_the_extension_and_lists_its_resource(
        aggregated: tuple[SecureCluster, Path, ExtensionServer]) -> None:
    _, config, _ = aggregated
    _until_available(config, "True")
    groups = json.loads(_ok(config, "get", "--raw", "/apis"))["groups"]
    entry = next(g for g in groups if g["name"] == GROUP)
    assert entry["preferredVersion"] == {"groupVersion": GV, "version": VERSION}
    assert "metrics.k8s.io" in {g["name"] for g in groups}  # Skiff's own stays served
    group = json.loads(_ok(config, "get", "--raw", f"/apis/{GROUP}"))
    assert (group["kind"], group["versions"]) == ("APIGroup", [
        {"groupVersion": GV, "version": VERSION}])
    resources = _ok(config, "api-resources", f"--api-group={GROUP}", "--no-headers")
    assert resources.split()[:2] == ["widgets", GV]
    widgets = _ok(config, "get", f"widgets.{GROUP}", "-n", "default")
    assert "seen-by-kubernetes-admin" in widgets
    # kubectl explain reads the extension's own OpenAPI v3 document, listed and proxied here
    explained = _ok(config, "explain", f"widgets.{GROUP}")
    assert "KIND:       Widget" in explained
    assert "A widget the test extension serves." in explained
    assert "The groups the front proxy named." in _ok(config, "explain",
                                                       f"widgets.{GROUP}.groups")


def test_ex8_a_watch_is_streamed_through(
        aggregated: tuple[SecureCluster, Path, ExtensionServer]) -> None:
    _, config, _ = aggregated
    _until_available(config, "True")
    raw = _ok(config, "get", "--raw", f"/apis/{GV}/widgets?watch=true")
    events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "first"), ("ADDED", "second")]
    watched = kubectl(config, "get", f"widgets.{GROUP}", "-n", "default", "--watch",
                      "--request-timeout=10s")
    names = [line.split()[0] for line in watched.stdout.splitlines()[1:] if line.strip()]
    assert names == ["seen-by-kubernetes-admin", "first", "second"], watched.stderr


def test_ex8_a_stopped_backend_turns_unavailable_and_requests_get_503(
        aggregated: tuple[SecureCluster, Path, ExtensionServer]) -> None:
    _, config, server = aggregated
    _until_available(config, "True")
    server.stop_serving()
    try:
        condition = _until_available(config, "False")
        assert condition["reason"] == "FailedDiscoveryCheck"
        assert condition["message"].startswith(
            f"failing or missing response from https://127.0.0.1:{server.port}/apis/{GV}")
        assert "connection refused" in condition["message"]
        done = kubectl(config, "get", "--raw", f"/apis/{GV}/namespaces/default/widgets")
        assert done.returncode != 0
        assert "ServiceUnavailable" in done.stderr, done.stderr
        assert "False (FailedDiscoveryCheck)" in _ok(config, "get", "apiservices")
    finally:
        server.resume()
    assert _until_available(config, "True")["reason"] == "Passed"  # and back again


WARDLE = """apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1alpha1.wardle.k8s.io
spec:
  insecureSkipTLSVerify: true
  group: wardle.k8s.io
  groupPriorityMinimum: 1000
  versionPriority: 15
  service:
    name: api
    namespace: wardle
  version: v1alpha1
"""


def test_ex8_the_official_clients_e2e_apiservice_manifest(
        aggregated: tuple[SecureCluster, Path, ExtensionServer], tmp_path: Path) -> None:
    """kubernetes-client/python's e2e `test_create_apiservice_from_yaml_with_conflict`:
    create from YAML, read, the same create refused as kube refuses it, delete."""
    from kubernetes import client, config, utils
    create_from_yaml = cast(Callable[..., object], utils.create_from_yaml)  # untyped
    _, kubeconfig, _ = aggregated
    manifest = tmp_path / "api-service.yaml"
    manifest.write_text(WARDLE)
    with config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
        create_from_yaml(api_client, str(manifest))
        registration = client.ApiregistrationV1Api(api_client)
        svc = registration.read_api_service(name="v1alpha1.wardle.k8s.io")
        spec = present(svc.spec)
        assert (present(svc.metadata).name, spec.group, spec.version) == (
            "v1alpha1.wardle.k8s.io", "wardle.k8s.io", "v1alpha1")
        with pytest.raises(utils.FailToCreateError) as refused:
            create_from_yaml(api_client, str(manifest))
        assert str(refused.value) == (
            'Error from server (Conflict): {"kind":"Status","apiVersion":"v1","metadata":{},'
            '"status":"Failure","message":"apiservices.apiregistration.k8s.io '
            '\\"v1alpha1.wardle.k8s.io\\" already exists","reason":"AlreadyExists",'
            '"details":{"name":"v1alpha1.wardle.k8s.io","group":"apiregistration.k8s.io",'
            '"kind":"apiservices"},"code":409}\n')
        # no Service behind it: unavailable, with kube's reason and message
        deadline = time.monotonic() + 8
        while True:
            stored = registration.read_api_service(name="v1alpha1.wardle.k8s.io")
            conditions = {c.type: c for c in present(stored.status).conditions or []}
            if "Available" in conditions:
                break
            assert time.monotonic() < deadline, "no Available condition"
            time.sleep(0.3)
        available = conditions["Available"]
        assert (available.status, available.reason, available.message) == (
            "False", "ServiceNotFound", 'service/api in "wardle" is not present')
        registration.delete_api_service(name="v1alpha1.wardle.k8s.io",
                                        body=client.V1DeleteOptions())
        with pytest.raises(client.ApiException) as gone:
            registration.read_api_service(name="v1alpha1.wardle.k8s.io")
        assert gone.value.status == 404


def test_ex8_extension_apiservers_find_the_front_proxy_trust_in_kube_system(
        aggregated: tuple[SecureCluster, Path, ExtensionServer]) -> None:
    cluster, config, _ = aggregated
    data = json.loads(_ok(config, "get", "configmap", NAME_OF_TRUST,
                          "-n", "kube-system", "-o", "json"))["data"]
    assert data["client-ca-file"] == cluster.pki.ca.read_text()
    assert "BEGIN CERTIFICATE" in data["requestheader-client-ca-file"]
    assert data["requestheader-client-ca-file"] != data["client-ca-file"]
    assert (data["requestheader-allowed-names"], data["requestheader-username-headers"],
            data["requestheader-group-headers"], data["requestheader-extra-headers-prefix"]
            ) == (f'["{PROXY_CLIENT}"]', '["X-Remote-User"]', '["X-Remote-Group"]',
                  '["X-Remote-Extra-"]')
    # what an extension's ServiceAccount is bound to, to read it (metrics-server's manifest)
    _ok(config, "create", "serviceaccount", "ext", "-n", "ex8")
    _ok(config, "create", "rolebinding", "ext-auth-reader", "-n", "kube-system",
        "--role=extension-apiserver-authentication-reader", "--serviceaccount=ex8:ext")
    deadline = time.monotonic() + 5
    while (can := kubectl(config, "auth", "can-i", "get", "configmap/" + NAME_OF_TRUST,
                          "-n", "kube-system", "--as=system:serviceaccount:ex8:ext")
           ).stdout.strip() != "yes":
        assert time.monotonic() < deadline, can.stdout + can.stderr
        time.sleep(0.2)
    assert kubectl(config, "auth", "can-i", "get", "configmap/other", "-n", "kube-system",
                   "--as=system:serviceaccount:ex8:ext").stdout.strip() == "no"


def test_ex8_another_user_is_authorized_here_then_named_to_the_backend(
        aggregated: tuple[SecureCluster, Path, ExtensionServer], tmp_path: Path) -> None:
    """bob (a bearer token, group `developers`): RBAC here decides first, as kube-apiserver
    authorizes every request before its aggregator proxies it; once granted, the backend
    is told bob and his groups, never his token."""
    cluster, config, server = aggregated
    _until_available(config, "True")
    bob = tmp_path / "bob.kubeconfig"
    bob.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "bob",
        "clusters": [{"name": "skiff", "cluster": {
            "server": cluster.https, "certificate-authority": str(cluster.pki.ca)}}],
        "users": [{"name": "bob", "user": {"token": "token-bob"}}],
        "contexts": [{"name": "bob", "context": {"cluster": "skiff", "user": "bob"}}]}))
    path = f"/apis/{GV}/namespaces/default/widgets"
    refused = kubectl(bob, "get", "--raw", path)
    assert refused.returncode != 0
    assert ('widgets.metrics.example.com is forbidden: User "bob" cannot list resource '
            '"widgets" in API group "metrics.example.com" in the namespace "default"'
            ) in refused.stderr
    _ok(config, "create", "clusterrole", "widget-reader", "--verb=get,list,watch",
        f"--resource=widgets.{GROUP}")
    _ok(config, "create", "rolebinding", "bob-reads-widgets", "-n", "default",
        "--clusterrole=widget-reader", "--user=bob")
    deadline = time.monotonic() + 5
    while (done := kubectl(bob, "get", "--raw", path)).returncode != 0:
        assert time.monotonic() < deadline, done.stderr
        time.sleep(0.2)
    widget = json.loads(done.stdout)["items"][0]
    assert widget["metadata"]["name"] == "seen-by-bob"
    assert set(widget["groups"]) == {"developers", "system:authenticated"}
    sent = [s for s in server.seen if s["user"] == "bob"][-1]
    assert sent["authorization"] is None and sent["client_cn"] == PROXY_CLIENT


def test_ex8_a_wrong_ca_bundle_fails_the_requests_not_the_check(
        aggregated: tuple[SecureCluster, Path, ExtensionServer]) -> None:
    """kube's availability check does not verify the backend's certificate (best
    effort); the proxy does, with the APIService's caBundle only: 503 with Go's x509
    error."""
    cluster, config, _ = aggregated
    other_ca = base64.b64encode(cluster.pki.ca.read_bytes()).decode()
    group, version = WRONG_CA_GV.split("/")
    _ok(config, "apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": f"{version}.{group}"},
        "spec": {"group": group, "version": version, "groupPriorityMinimum": 100,
                 "versionPriority": 100, "caBundle": other_ca,
                 "service": {"namespace": "ex8", "name": "metrics-ext"}}}))
    deadline = time.monotonic() + 8
    while True:
        stored = json.loads(_ok(config, "get", "apiservice", f"{version}.{group}",
                                "-o", "json"))
        conditions = (stored.get("status") or {}).get("conditions") or []
        if conditions:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    try:
        assert (conditions[0]["status"], conditions[0]["reason"]) == ("True", "Passed")
        context = ssl.create_default_context(cafile=str(cluster.pki.ca))
        context.load_cert_chain(cluster.pki.admin.cert, cluster.pki.admin.key)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{cluster.https}/apis/{WRONG_CA_GV}/things",
                                   context=context, timeout=10)
        assert refused.value.code == 503
        assert refused.value.read().decode() == (
            "error trying to reach service: tls: failed to verify certificate: x509: "
            "certificate signed by unknown authority\n")
    finally:  # kubectl's discovery in the other tests would stumble on it
        _ok(config, "delete", "apiservice", f"{version}.{group}")
