"""SPEC AX7: the Service variables a container gets, and what the service proxy relays to
(pure functions; the relay itself is tested with real pods in test_incluster.py)."""

from __future__ import annotations

from skiff.api.types import Obj
from skiff.kubelet.servicelinks import service_env
from skiff.kubelet.serviceproxy import ready_backends, service_ports


def svc(name: str, ns: str, ip: str, *ports: Obj) -> Obj:
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": list(ports)}}


KUBERNETES = svc("kubernetes", "default", "10.96.0.1",
                 {"name": "https", "port": 443, "protocol": "TCP"})


def pod(ns: str = "shop", links: bool | None = None) -> Obj:
    spec = {} if links is None else {"enableServiceLinks": links}
    return {"metadata": {"name": "p", "namespace": ns}, "spec": spec}


def test_ax7_service_links_name_every_service_of_the_namespace_like_the_kubelet() -> None:
    web = svc("my-web", "shop", "10.96.3.4", {"name": "http", "port": 80, "protocol": "TCP"},
              {"name": "metrics", "port": 9090, "protocol": "TCP"})
    env = service_env(pod(), [web, svc("headless", "shop", "None", {"port": 80})],
                      KUBERNETES)
    assert env == {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_SERVICE_PORT_HTTPS": "443", "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.96.0.1:443",
        "KUBERNETES_PORT_443_TCP_PROTO": "tcp", "KUBERNETES_PORT_443_TCP_PORT": "443",
        "KUBERNETES_PORT_443_TCP_ADDR": "10.96.0.1",
        "MY_WEB_SERVICE_HOST": "10.96.3.4", "MY_WEB_SERVICE_PORT": "80",
        "MY_WEB_SERVICE_PORT_HTTP": "80", "MY_WEB_SERVICE_PORT_METRICS": "9090",
        "MY_WEB_PORT": "tcp://10.96.3.4:80",
        "MY_WEB_PORT_80_TCP": "tcp://10.96.3.4:80", "MY_WEB_PORT_80_TCP_PROTO": "tcp",
        "MY_WEB_PORT_80_TCP_PORT": "80", "MY_WEB_PORT_80_TCP_ADDR": "10.96.3.4",
        "MY_WEB_PORT_9090_TCP": "tcp://10.96.3.4:9090", "MY_WEB_PORT_9090_TCP_PROTO": "tcp",
        "MY_WEB_PORT_9090_TCP_PORT": "9090", "MY_WEB_PORT_9090_TCP_ADDR": "10.96.3.4"}


def test_ax7_enable_service_links_false_keeps_only_the_kubernetes_service() -> None:
    web = svc("web", "shop", "10.96.3.4", {"port": 80, "protocol": "TCP"})
    env = service_env(pod(links=False), [web], KUBERNETES)
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert not any(k.startswith("WEB_") for k in env)


def test_ax7_services_of_other_namespaces_are_not_linked() -> None:
    other = svc("web", "elsewhere", "10.96.3.4", {"port": 80, "protocol": "TCP"})
    assert not any(k.startswith("WEB_") for k in service_env(pod(), [other], None))


SLICE = {"metadata": {"namespace": "shop", "name": "web-abc",
                      "labels": {"kubernetes.io/service-name": "web"}},
         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
         "endpoints": [
             {"addresses": ["10.244.1.5"], "conditions": {"ready": True},
              "targetRef": {"kind": "Pod", "name": "a"}},
             {"addresses": ["10.244.1.6"], "conditions": {"ready": False},
              "targetRef": {"kind": "Pod", "name": "b"}}]}


def test_ax7_proxy_serves_tcp_cluster_ports_and_only_ready_endpoints() -> None:
    web = svc("web", "shop", "10.96.3.4", {"name": "http", "port": 80, "protocol": "TCP"},
              {"name": "dns", "port": 53, "protocol": "UDP"})
    ports = service_ports([web, svc("h", "shop", "None", {"port": 80})])
    assert ports == {("10.96.3.4", 80): ("shop", "web", "http")}
    assert ready_backends([SLICE], "shop", "web", "http") == [("10.244.1.5", 8080, True)]
    assert ready_backends([SLICE], "shop", "web", "other") == []
    assert ready_backends([SLICE], "other-ns", "web", "http") == []
