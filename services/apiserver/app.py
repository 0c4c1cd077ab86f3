"""The apiserver process: settings, start-up order and clean shutdown.

Start-up: connect to etcd (retrying), create the system namespaces and priority classes,
start the watch cache, then serve gRPC and report SERVING; afterwards health is NOT_SERVING
whenever the watch cache cannot confirm it is current with etcd's quorum (see
storage/watchcache.py). SIGTERM drains in-flight calls
and stops watches. Every setting is a Kubernetes flag name (kebab-case) or the matching
`SKIFF_APISERVER_*` environment variable, so tests can compress time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from skiff.api.errors import ApiError
from skiff.api.podsecurity import ConfigError as PodSecurityConfigError
from skiff.api.podsecurity import PodSecurityConfig
from skiff.apiserver import replicas
from skiff.apiserver.admission.podsecurity import load_admission_config
from skiff.apiserver.admission.tolerations import AdmissionConfig
from skiff.apiserver.aggregator import (
    Aggregator,
    AuthenticationTrust,
    ProxyClientCertificate,
    comma_list,
)
from skiff.apiserver.apiextensions.controller import CrdController
from skiff.apiserver.auth.authenticator import Authenticator
from skiff.apiserver.auth.bootstraptoken import BootstrapTokens
from skiff.apiserver.auth.escalation import EscalationCheck
from skiff.apiserver.auth.rbac import ApiAuthorizer
from skiff.apiserver.auth.reconcile import reconcile_bootstrap_policy
from skiff.apiserver.auth.satoken import DEFAULT_ISSUER, BoundObjects, TokenAuthority
from skiff.apiserver.endpoints.grpcservice import NOT_SERVING, SERVING, ApiService, build_server
from skiff.apiserver.endpoints.guard import RequestGuard, TlsFiles
from skiff.apiserver.endpoints.healthz import HealthChecks
from skiff.apiserver.endpoints.http import HttpServer
from skiff.apiserver.endpoints.kubeapi import KubeApi
from skiff.apiserver.endpoints.metricsapi import MetricsApi
from skiff.apiserver.endpoints.streaming.proxy import PodStreams
from skiff.apiserver.kubernetesservice import KubernetesService
from skiff.apiserver.registry.service.clusterip import (
    DEFAULT_SERVICE_CIDR,
    ServiceIPRepair,
    ServiceIPs,
)
from skiff.apiserver.registry.service.nodeports import (
    DEFAULT_NODE_PORT_RANGE,
    NodePortRepair,
    NodePorts,
)
from skiff.apiserver.registry.store import Registry, RegistryConfig
from skiff.apiserver.storage.compaction import Compactor
from skiff.apiserver.storage.etcd import EtcdStorage
from skiff.apiserver.storage.values import NO_SPACE
from skiff.apiserver.storage.watchcache import WatchCache
from skiff.apiserver.supervise import supervised
from skiff.certtoken import MAX_LIFETIME_SECONDS
from skiff.client.credentials import Credentials
from skiff.etcdtls import etcd_tls
from skiff.gctuning import tune_gc
from skiff.logs import setup_logging
from skiff.settings import duration, load_settings, setting
from skiff.tasks import cancel_tasks
from skiff.tracing import setup_tracing, shutdown_tracing

log = logging.getLogger("skiff.apiserver")


@dataclass(frozen=True)
class ApiServerSettings:
    etcd_servers: str = setting("http://127.0.0.1:2379", help="etcd client URL, or several "
                                "comma-separated (members of one cluster)")
    bind_address: str = setting("127.0.0.1", help="address to serve gRPC on")
    secure_port: int = setting(6443, help="gRPC port (0 picks a free one; see --port-file)")
    port_file: str = setting("", help="write the bound port to this file once serving")
    http_port: int = setting(-1, help="Kubernetes REST port for kubectl (0 picks a free "
                                      "one, -1 turns it off)")
    http_read_header_timeout: float = duration(
        32.0, help="close a connection to the Kubernetes REST port whose request line and "
                   "headers have not all arrived this long after it opened or after the "
                   "next request's first byte (kube-apiserver's fixed ReadHeaderTimeout)")
    watch_cache_size: int = setting(50_000, help="events kept in the watch cache window")
    event_ttl: float = duration(
        3600.0, help="how long etcd keeps an Event after its last write (kube-apiserver's "
                     "--event-ttl; up to a minute more, as leases are shared; 0 = keep)")
    # Only gRPC streams whose client asks (`coalesce`: skiff's scheduler) wait: the
    # apiserver's own consumers of the cache (the ServiceAccount lookup a token review
    # reads right after a delete), the HTTP front and every other client see each event at
    # once. Not every watcher: a controller's informer a tick behind acts on a staler cache
    # (CI's adoption tests: a ReplicaSet recreated right after its pods were orphaned still
    # saw them owned, through a pod stream that waited while the ReplicaSet's did not).
    watch_coalesce: float = duration(
        0.02, help="a busy gRPC watch stream whose client asks to coalesce sends at most "
                   "one message per this long, holding every event that came meanwhile; an "
                   "idle one sends each event at once (0 = a message per wake-up for all)")
    watch_bookmark_interval: float = duration(10.0, help="how often idle watches get a "
                                                         "BOOKMARK")
    watch_quorum_check_interval: float = duration(
        5.0, help="how often the watch cache confirms with a quorum read that it is current "
                  "(watches are closed and health is NOT_SERVING while it cannot)")
    etcd_readycheck_timeout: float = duration(
        2.0, help="how long that quorum read may take before the check fails: a cut-off "
                  "apiserver closes its watches and reports NOT_SERVING within "
                  "--watch-quorum-check-interval plus this")
    default_not_ready_toleration_seconds: int = setting(300)
    default_unreachable_toleration_seconds: int = setting(300)
    etcd_request_timeout: float = duration(5.0)
    etcd_retry_seconds: float = duration(10.0, help="how long a request retries a lost etcd")
    etcd_compaction_interval: float = duration(
        300.0, help="how often etcd's log is compacted, 0 never (SPEC AU10); also how long "
                    "object history (skiff history, reads at a past revision, watches from "
                    "an old resourceVersion) is kept: at least one interval")
    shutdown_grace_seconds: float = duration(5.0)
    log_level: str = setting("INFO")
    # Identity and access (SPEC AU1-AU4). Without --tls-cert-file: the insecure mode.
    tls_cert_file: str = setting("", help="serving certificate (PEM) of gRPC and HTTPS; "
                                 "empty runs the insecure plaintext mode (no authentication)")
    tls_private_key_file: str = setting("", help="key of --tls-cert-file")
    client_ca_file: str = setting("", help="CA that signs client certificates (CN = user, "
                                  "O = groups)")
    kubelet_client_certificate: str = setting(
        "", help="client certificate for the kubelets' own port (logs, exec, metrics)")
    kubelet_client_key: str = setting("", help="key of --kubelet-client-certificate")
    kubelet_certificate_authority: str = setting(
        "", help="CA of the kubelets' serving certificates")
    token_auth_file: str = setting("", help="static bearer tokens, CSV: "
                                   "token,user,uid,\"group1,group2\"")
    anonymous_auth_paths: tuple[str, ...] = setting(
        (), help="comma-separated paths a request without credentials may reach as "
                 "system:anonymous, RBAC deciding (Kubernetes' anonymous authenticator "
                 "with path conditions; `skiff up`: cluster-info)")
    enable_bootstrap_token_auth: bool = setting(
        False, help="bearer tokens <id>.<secret> from bootstrap.kubernetes.io/token Secrets "
                    "in kube-system (TLS bootstrapping, `skiff token`)")
    etcd_cafile: str = setting("", help="CA of etcd's serving certificate (TLS to etcd)")
    etcd_certfile: str = setting("", help="client certificate for etcd")
    etcd_keyfile: str = setting("", help="key of --etcd-certfile")
    service_account_signing_key_file: str = setting(
        "", help="PEM RSA private key that signs ServiceAccount tokens (created there if "
                 "missing; empty: a key for this process's lifetime only)")
    service_account_key_file: str = setting(
        "", help="PEM public key also accepted when verifying ServiceAccount tokens")
    service_account_issuer: str = setting(DEFAULT_ISSUER,
                                          help="`iss` of ServiceAccount tokens")
    service_account_max_token_expiration: float = duration(
        0.0, help="the longest lifetime a TokenRequest gets (longer requests are "
                  "shortened); 0: no maximum, else between 1h and 2^32 s")
    service_account_extend_token_expiration: bool = setting(
        True, help="pod-bound tokens asked for 3607 s (the kubelet's kube-api-access "
                   "volume) live a year, with `warnafter` at the hour")
    certificate_token_max_lifetime: float = duration(
        MAX_LIFETIME_SECONDS, help="the longest lifetime of a gRPC certificate token "
                                   "(skiff.certtoken) that is accepted")
    disable_admission_plugins: str = setting(
        "", help="comma-separated admission plugins to turn off (ServiceAccount, "
                 "PodSecurity)")
    admission_control_config_file: str = setting(
        "", help="AdmissionConfiguration file; its PodSecurity entry (a "
                 "PodSecurityConfiguration) sets the cluster's default Pod Security levels "
                 "and exemptions (default: privileged, none)")
    processes: int = setting(1, help="serve from this many processes sharing the ports "
                                     "(SO_REUSEPORT), each with its own watch cache; needs "
                                     "fixed --secure-port and --http-port")
    reuse_port: bool = setting(False, help="bind with SO_REUSEPORT (set for --processes)")
    # Services (SPEC AX7)
    service_cluster_ip_range: str = setting(
        DEFAULT_SERVICE_CIDR, help="CIDR from which Services get their cluster IPs; its "
                                   "first address is the `kubernetes` Service's")
    advertise_address: str = setting(
        "", help="address listed in the `kubernetes` Service's EndpointSlice (default: "
                 "--bind-address, or the host name's address when that is 0.0.0.0)")
    endpoint_reconcile_interval: float = duration(
        10.0, help="how often this apiserver renews its entry in the `kubernetes` "
                   "Service's endpoints (entries expire after three intervals)")
    service_ip_repair_interval: float = duration(
        30.0, help="how often cluster IPs and node ports whose Service is gone are looked "
                   "for (and freed)")
    service_node_port_range: str = setting(
        DEFAULT_NODE_PORT_RANGE, help="ports (base-max, inclusive) from which NodePort and "
                                      "LoadBalancer Services get their node ports")
    # The aggregation layer (SPEC EX8)
    proxy_client_cert_file: str = setting(
        "", help="client certificate this apiserver presents to extension apiservers "
                 "when it proxies a request of an APIService (front proxy)")
    proxy_client_key_file: str = setting("", help="key of --proxy-client-cert-file")
    requestheader_client_ca_file: str = setting(
        "", help="CA that extension apiservers trust front-proxy client certificates "
                 "from (published in kube-system/extension-apiserver-authentication)")
    requestheader_allowed_names: str = setting(
        "", help="comma-separated common names a front-proxy certificate may have "
                 "(published; empty: any)")
    requestheader_username_headers: str = setting(
        "X-Remote-User", help="headers the user name is read from (published)")
    requestheader_group_headers: str = setting(
        "X-Remote-Group", help="headers the groups are read from (published)")
    requestheader_extra_headers_prefix: str = setting(
        "X-Remote-Extra-", help="header prefixes of the user's extra (published)")
    apiservice_availability_check_interval: float = duration(
        10.0, help="how often every APIService's backend is checked and its Available "
                   "condition updated")


def pod_security_config(s: ApiServerSettings) -> PodSecurityConfig | None:
    """SPEC AU7: PodSecurity's configuration, or None when the plugin is disabled."""
    if "PodSecurity" in s.disable_admission_plugins.split(","):
        return None
    if not s.admission_control_config_file:
        return PodSecurityConfig()
    try:
        return load_admission_config(Path(s.admission_control_config_file))
    except PodSecurityConfigError as err:
        raise SystemExit(f"skiff-apiserver: --admission-control-config-file: {err}") from None


def _advertise(bind_address: str) -> str:
    """--advertise-address's default: the bind address, or for 0.0.0.0 the host name's
    address (a compose container's own IP), else loopback."""
    if bind_address not in ("0.0.0.0", ""):
        return bind_address
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def parse_settings(argv: list[str] | None = None) -> ApiServerSettings:
    return load_settings(ApiServerSettings, argv, prog="skiff-apiserver",
                         env_prefix="SKIFF_APISERVER_",
                         description="Skiff's apiserver: the only etcd client.")


class ApiServer:
    """`run()` until `shutdown()` (idempotent) or SIGTERM."""

    def __init__(self, settings: ApiServerSettings) -> None:
        self.settings = settings
        self._stop = asyncio.Event()

    def shutdown(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        s = self.settings
        storage = EtcdStorage(s.etcd_servers, request_timeout=s.etcd_request_timeout,
                              retry_seconds=s.etcd_retry_seconds, tls=etcd_tls(
                                  cafile=s.etcd_cafile, certfile=s.etcd_certfile,
                                  keyfile=s.etcd_keyfile))
        serving = False  # health follows the cache's currency only while serving
        checks = HealthChecks()  # /healthz, /livez, /readyz

        async def on_currency(current: bool) -> None:
            checks.etcd(current)
            if serving:
                await health.set("", SERVING if current else NOT_SERVING)

        cache = WatchCache(storage, capacity=s.watch_cache_size,
                           bookmark_interval=s.watch_bookmark_interval,
                           quorum_check_interval=s.watch_quorum_check_interval,
                           quorum_check_timeout=s.etcd_readycheck_timeout,
                           on_currency=on_currency, coalesce=s.watch_coalesce)
        storage.recent = cache.recent  # leader Leases for fenced writes (storage._txn)
        registry = Registry(storage, cache, config=RegistryConfig(admission=AdmissionConfig(
            default_not_ready_toleration_seconds=s.default_not_ready_toleration_seconds,
            default_unreachable_toleration_seconds=s.default_unreachable_toleration_seconds),
            service_account_admission="ServiceAccount" not in
            s.disable_admission_plugins.split(","),
            pod_security=pod_security_config(s), event_ttl=math.ceil(s.event_ttl)))
        try:
            registry.strategies.services.service_ips = ServiceIPs(storage,
                                                                  s.service_cluster_ip_range)
            registry.strategies.services.node_ports = NodePorts(storage,
                                                                s.service_node_port_range)
        except ValueError as err:
            raise SystemExit(f"skiff-apiserver: {err}") from None
        try:
            tokens = TokenAuthority(
                signing_key_file=s.service_account_signing_key_file,
                key_file=s.service_account_key_file, issuer=s.service_account_issuer,
                max_expiration_seconds=int(s.service_account_max_token_expiration),
                extend_expiration=s.service_account_extend_token_expiration)
        except ValueError as err:
            raise SystemExit(f"skiff-apiserver: {err}") from None
        # what ServiceAccount tokens are bound to, checked on every request (SPEC AU9)
        bound = BoundObjects(storage, cache, service_accounts=registry.lookups.service_accounts)
        bootstrap_tokens = BootstrapTokens(storage, cache) \
            if s.enable_bootstrap_token_auth else None
        tls, guard = self._security(registry, tokens, bound, bootstrap_tokens)
        reuse = s.reuse_port or s.processes > 1
        metrics = MetricsApi(registry, kubelet=self._kubelet_credentials())
        server, port, health = build_server(ApiService(registry, tokens=tokens,
                                                       metrics=metrics),
                                            address=f"{s.bind_address}:{s.secure_port}",
                                            tls=tls, guard=guard, reuse_port=reuse)
        await health.set("", NOT_SERVING)
        await server.start()
        try:
            async with asyncio.TaskGroup() as tg:
                await self._wait_for_etcd(storage, registry)
                if self._stop.is_set():  # told to stop before etcd answered
                    return
                # Every loop survives etcd errors (SPEC AU10): one that raised would end the
                # TaskGroup, and the process with it.
                cache_task = tg.create_task(supervised("watch-cache", cache.run),
                                            name="watch-cache")
                monitor_task = tg.create_task(supervised("watch-cache-monitor", cache.monitor),
                                              name="watch-cache-monitor")
                await cache.ready()
                lookups_task = tg.create_task(supervised("lookups", registry.run_lookups),
                                              name="lookups")
                # the CRDs stored now are served before any request is (SPEC EX1)
                crds = CrdController(registry)
                try:
                    await crds.sync()
                except ApiError as err:  # etcd unavailable: the controller's loop retries
                    log.warning("CRDs not served yet", extra={"error": err.message})
                crd_task = tg.create_task(supervised("crd-controller", crds.run),
                                          name="crd-controller")
                # issue 35: the stored Perturbations, applied to their subjects' reads
                registry.perturbations.kubelet = self._kubelet_credentials()
                perturbations_task = tg.create_task(supervised(
                    "perturbations", registry.perturbations.run), name="perturbations")
                bound_task = tg.create_task(supervised("bound-objects", bound.run),
                                            name="bound-objects")
                if bootstrap_tokens is not None:  # SPEC JN3
                    bootstrap_task: asyncio.Task[None] | None = tg.create_task(supervised(
                        "bootstrap-tokens", bootstrap_tokens.run), name="bootstrap-tokens")
                else:
                    bootstrap_task = None
                aggregator = Aggregator(registry, certificate=ProxyClientCertificate(
                    s.proxy_client_cert_file, s.proxy_client_key_file),
                    check_interval=s.apiservice_availability_check_interval,
                    trust=self._authentication_trust())
                aggregator_task = tg.create_task(supervised("aggregator", aggregator.run),
                                                 name="aggregator")
                http = None
                if s.http_port >= 0:
                    http = HttpServer(
                        KubeApi(registry, guard=guard, tokens=tokens,
                                kubelet=self._kubelet_credentials(), health=checks,
                                aggregator=aggregator).handle,
                        host=s.bind_address, port=s.http_port,
                        ssl_context=tls.ssl_context() if tls is not None else None,
                        authenticate=(guard.http_user_of if guard is not None else None),
                        impersonate=(guard.http_impersonate if guard is not None else None),
                        routes=PodStreams(registry, guard=guard,
                                          kubelet=self._kubelet_credentials()).register,
                        reuse_port=reuse, header_timeout=s.http_read_header_timeout,
                        anonymous_paths=frozenset(s.anonymous_auth_paths))
                    http_port = await http.start()
                    scheme = "https" if tls is not None else "http"
                    log.info("kubectl endpoint serving",
                             extra={"address": f"{scheme}://{s.bind_address}:{http_port}"})
                background: list[asyncio.Task[None]] = [tg.create_task(supervised(
                    "service-ip-repair",
                    ServiceIPRepair(storage, interval=s.service_ip_repair_interval).run),
                    name="service-ip-repair"), tg.create_task(supervised(
                    "node-port-repair",
                    NodePortRepair(storage, interval=s.service_ip_repair_interval).run),
                    name="node-port-repair"), tg.create_task(supervised(
                    "etcd-compaction",
                    Compactor(storage, interval=s.etcd_compaction_interval).run),
                    name="etcd-compaction")]
                if http is not None:
                    advertise = s.advertise_address or _advertise(s.bind_address)
                    background.append(tg.create_task(supervised(
                        "kubernetes-service", KubernetesService(
                            registry, cidr=s.service_cluster_ip_range, address=advertise,
                            port=http_port, interval=s.endpoint_reconcile_interval).run),
                        name="kubernetes-service"))
                await health.set("", SERVING)
                serving = True
                if s.port_file:
                    Path(s.port_file).write_text(f"{port}\n")
                log.info("apiserver serving", extra={"address": f"{s.bind_address}:{port}",
                                                     "etcd": s.etcd_servers})
                await self._stop.wait()
                log.info("apiserver shutting down")
                serving = False
                checks.set("shutdown", False)  # /readyz fails while requests drain
                await health.set("", NOT_SERVING)
                await cancel_tasks(*background)  # the kubernetes Service endpoint is withdrawn
                if http is not None:
                    await http.stop()
                await server.stop(s.shutdown_grace_seconds)
                if bootstrap_task is not None:
                    await cancel_tasks(bootstrap_task)
                await cancel_tasks(aggregator_task, crd_task, perturbations_task, bound_task,
                                   lookups_task, monitor_task, cache_task)
        finally:
            await server.stop(0)
            await storage.close()

    def _authentication_trust(self) -> AuthenticationTrust:
        """What extension apiservers are told to trust (SPEC EX8)."""
        s = self.settings
        return AuthenticationTrust(
            client_ca_file=s.client_ca_file,
            requestheader_client_ca_file=s.requestheader_client_ca_file,
            requestheader_allowed_names=comma_list(s.requestheader_allowed_names),
            requestheader_username_headers=comma_list(s.requestheader_username_headers),
            requestheader_group_headers=comma_list(s.requestheader_group_headers),
            requestheader_extra_headers_prefix=comma_list(
                s.requestheader_extra_headers_prefix))

    def _kubelet_credentials(self) -> Credentials:
        """How this apiserver proves itself to the kubelets (none: plaintext kubelets)."""
        s = self.settings
        return Credentials(ca_file=s.kubelet_certificate_authority,
                           cert_file=s.kubelet_client_certificate,
                           key_file=s.kubelet_client_key)

    def _security(self, registry: Registry, tokens: TokenAuthority, bound: BoundObjects,
                  bootstrap_tokens: BootstrapTokens | None = None
                  ) -> tuple[TlsFiles | None, RequestGuard | None]:
        s = self.settings
        if not s.tls_cert_file:
            log.warning("INSECURE: serving plaintext without authentication or "
                        "authorization; anyone who can reach this port can do anything "
                        "(give --tls-cert-file, --tls-private-key-file, --client-ca-file)")
            return None, None
        if not (s.tls_private_key_file and s.client_ca_file):
            raise SystemExit("skiff-apiserver: --tls-cert-file needs --tls-private-key-file "
                             "and --client-ca-file")
        tls = TlsFiles(Path(s.tls_cert_file), Path(s.tls_private_key_file),
                       Path(s.client_ca_file))
        authenticator = Authenticator(
            client_ca_file=Path(s.client_ca_file),
            token_auth_file=Path(s.token_auth_file) if s.token_auth_file else None,
            service_accounts=tokens, bound_objects=bound.get,
            certificate_token_max_age=s.certificate_token_max_lifetime,
            bootstrap_tokens=bootstrap_tokens)
        authorizer = ApiAuthorizer(registry)
        # AU6: RBAC writes need the permissions they grant (or escalate/bind)
        registry.strategies.rbac.escalation = EscalationCheck(authorizer=authorizer,
                                                              rbac=authorizer.rbac)
        return tls, RequestGuard(authenticator, authorizer,
                                 anonymous_paths=frozenset(s.anonymous_auth_paths))

    async def _wait_for_etcd(self, storage: EtcdStorage, registry: Registry) -> None:
        delay = 0.1
        while not self._stop.is_set():
            try:
                await storage.connect()
                await registry.ensure_system_objects()
                await reconcile_bootstrap_policy(registry)
                return
            except Exception as err:
                if isinstance(err, ApiError) and err.message == NO_SPACE:
                    # Serve reads and deletes meanwhile (SPEC AU10), as kube-apiserver does.
                    log.warning("etcd is out of space (NOSPACE alarm): serving reads and "
                                "deletes; writes fail until an operator compacts, "
                                "defragments and disarms the alarm",
                                extra={"etcd": storage.endpoint})
                    return
                log.warning("waiting for etcd", extra={"etcd": storage.endpoint,
                                                       "error": str(err)})
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    setup_logging("apiserver", settings.log_level)
    children: list[subprocess.Popen[bytes]] = []
    if settings.processes > 1:
        if settings.secure_port == 0 or settings.http_port == 0:
            raise SystemExit("--processes: give fixed --secure-port and --http-port (the "
                             "processes share them)")
        children = replicas.start_replicas(settings.processes - 1,
                                           sys.argv[1:] if argv is None else argv)
    setup_tracing("skiff-apiserver")
    app = ApiServer(settings)
    tune_gc()

    async def runner() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, app.shutdown)
        await app.run()

    try:
        asyncio.run(runner())
    except KeyboardInterrupt:
        pass
    finally:
        replicas.stop_replicas(children)
        with contextlib.suppress(Exception):
            shutdown_tracing()
