"""Control-plane failure scenarios 1 and 4 in the compose cluster's HA profile
(deploy/compose/compose.ha.yaml: etcd, etcd-2, etcd-3, apiserver, apiserver-2, two
schedulers, two controller-managers, three nodes, the dockerized power fence agent), with
real containers and real cuts (`skiff chaos`, i.e. skiff.cluster.chaos). Timings compressed by
an override file; a StatefulSet pet and a ReplicaSet run throughout.

1. `etcd` (apiserver's first member) cut off: writes through apiserver are acknowledged
   (its etcd client moved to the majority) or fail cleanly, apiserver-2 serves, `etcd`
   catches up after the heal, and every watcher's events equal etcd's revision log.
4. The controller-manager leader isolated from both apiservers while the pet's node is
   being fenced (the Fence is Pending: the agent is stopped until the leader is cut): the
   other takes over, the node is fenced exactly once, a write with the old leader's epoch is
   refused, and the old pet's container is dead before its replacement runs.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from skiff.api import ApiError, Reason
from skiff.api.types import Obj
from skiff.client import ApiClient
from skiff.cluster.chaos import docker as chaos
from skiff.rpc.epoch import LeaderEpoch
from tests.integration.compose.conftest import (
    COMPOSE_DIR,
    ComposeProject,
    log,
    node_ready,
    run,
    wait_for,
)
from tests.integration.ha.scenarios import Watchers, Writes, lease, write_until

# Docker tests never run at once (one engine, heavy): pytest-xdist --dist loadgroup.
pytestmark = pytest.mark.xdist_group("docker")

NODES = ["node-1", "node-2", "node-3"]
CMS = ["controller-manager", "controller-manager-2"]
SERVICES = ["etcd", "etcd-2", "etcd-3", "apiserver", "apiserver-2", "scheduler",
            "scheduler-2", *CMS, "fence-agent", *NODES]
ELECTION = {"LEADER_ELECT_LEASE_DURATION": "8s", "LEADER_ELECT_RENEW_DEADLINE": "6s",
            "LEADER_ELECT_RETRY_PERIOD": "1500ms"}
# Node grace 20 s: kubelets whose first apiserver sits on the cut etcd member miss a few
# seconds of Lease renewals while their requests time out and move to apiserver-2; a
# shorter grace fences their nodes during scenario 1 (seen with 6 s).
CM_ENV = {"SKIFF_CONTROLLER_MANAGER_NODE_MONITOR_GRACE_PERIOD": "20s",
          "SKIFF_CONTROLLER_MANAGER_NODE_MONITOR_PERIOD": "1s",
          "SKIFF_CONTROLLER_MANAGER_FENCING_DELAY": "3s",
          **{f"SKIFF_CONTROLLER_MANAGER_{k}": v for k, v in ELECTION.items()}}
OVERRIDE = {"services": {
    **{api: {"environment": {"SKIFF_APISERVER_DEFAULT_UNREACHABLE_TOLERATION_SECONDS": "600",
                             "SKIFF_APISERVER_ETCD_REQUEST_TIMEOUT": "2s",
                             "SKIFF_APISERVER_ETCD_RETRY_SECONDS": "2"}}
       for api in ("apiserver", "apiserver-2")},
    **{cm: {"environment": CM_ENV} for cm in CMS},
    **{s: {"environment": {f"SKIFF_SCHEDULER_{k}": v for k, v in ELECTION.items()}}
       for s in ("scheduler", "scheduler-2")},
    "fence-agent": {"environment": {"SKIFF_FENCE_AGENT_RESYNC_PERIOD": "2s"}},
    **{node: {"environment": {"SKIFF_KUBELET_NODE_LEASE_DURATION_SECONDS": "4"}}
       for node in NODES}}}


class HaProject(ComposeProject):
    """The compose project with compose.ha.yaml, then the timing override."""

    api2_port: int = 0
    http2_port: int = 0

    def env(self) -> dict[str, str]:
        from skiff.cluster.processes import free_port

        self.api2_port = self.api2_port or free_port()
        self.http2_port = self.http2_port or free_port()
        return {**super().env(), "SKIFF_API_PORT_2": str(self.api2_port),
                "SKIFF_HTTP_PORT_2": str(self.http2_port)}

    def compose(self, *args: str, timeout: float = 300,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        files = ["-f", str(COMPOSE_DIR / "compose.yaml"),
                 "-f", str(COMPOSE_DIR / "compose.ha.yaml")]
        if self.override is not None:
            files += ["-f", str(self.override)]
        return run([*self.command, "-p", self.name, *files, *args], env=self.env(),
                   timeout=timeout, check=check, cwd=COMPOSE_DIR)


def _workloads() -> list[Obj]:
    template = {"spec": {"terminationGracePeriodSeconds": 2,
                         "containers": [{"name": "main", "image": "busybox",
                                         "command": ["sleep", "3600"]}]}}
    return [{"apiVersion": "apps/v1", "kind": "StatefulSet",
             "metadata": {"name": "db", "namespace": "default"},
             "spec": {"replicas": 1, "serviceName": "db",
                      "selector": {"matchLabels": {"app": "db"}},
                      "template": {"metadata": {"labels": {"app": "db"}}, **template}}},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet",
             "metadata": {"name": "rs", "namespace": "default"},
             "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "rs"}},
                      "template": {"metadata": {"labels": {"app": "rs"}}, **template}}}]


@pytest.mark.timeout(900)
def test_issue11_compose_ha_scenarios_1_and_4(tmp_path: Path, docker_engine: Any,
                                              skiff_image: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    project = HaProject(engine=docker_engine, image=skiff_image)
    project.use_admin(monkeypatch)  # the HA profile runs with TLS too
    project.override = tmp_path / "compose.override.json"  # JSON is YAML
    project.override.write_text(json.dumps(OVERRIDE))
    try:
        t0 = time.monotonic()
        project.compose("up", "-d", "--no-build", *SERVICES, timeout=300)
        project.wait_healthy(SERVICES, timeout=240)
        log(f"{len(SERVICES)} HA services healthy in {time.monotonic() - t0:.1f}s")
        asyncio.run(_scenarios(project, project.api2_port))
    except BaseException:
        project.print_logs(keep_in=tmp_path)
        raise
    finally:
        project.down()
        label = f"label=com.docker.compose.project={project.name}"
        left = project.docker("ps", "-aq", "--filter", label).stdout.split()
        assert not left, f"containers of {project.name} left after compose down: {left}"


async def _scenarios(project: HaProject, api2_port: int) -> None:
    api1 = f"127.0.0.1:{project.api_port}"
    api2 = f"127.0.0.1:{api2_port}"
    async with ApiClient(f"{api1},{api2}", retry_seconds=30, timeout=10) as api:
        async def all_ready(c: ApiClient) -> list[str]:
            nodes = (await c.list("nodes"))["items"]
            names = sorted(n["metadata"]["name"] for n in nodes if node_ready(n))
            return names if names == NODES else []
        await wait_for(api, "node-1..3 Ready", all_ready, timeout=120)
        for obj in _workloads():
            await api.create(obj)
        await wait_for(api, "rs whole", _rs_whole, timeout=120)
        await _scenario1(project, api, api1, api2)
        await _scenario4(project, api)


async def _rs_whole(api: ApiClient) -> bool:
    rs = await api.get("replicasets", "rs", "default")
    return int((rs.get("status") or {}).get("readyReplicas") or 0) == 2


def _member_revision(project: HaProject, service: str) -> int:
    # etcd serves TLS with client-certificate auth: the member's own certificate
    # (server and client usage, from the etcd CA) is the one in its container.
    code = ("import json,ssl,urllib.request as u\n"
            "c=ssl.create_default_context(cafile='/etc/skiff/pki/ca.crt')\n"
            "c.load_cert_chain('/etc/skiff/pki/server.crt','/etc/skiff/pki/server.key')\n"
            "r=u.Request('https://127.0.0.1:2379/v3/maintenance/status',data=b'{}',"
            "method='POST')\n"
            "print(json.load(u.urlopen(r,timeout=3,context=c))['header']['revision'])\n")
    done = project.docker("exec", project.container(service), "python3", "-c", code,
                          check=False)
    return int(done.stdout.strip()) if done.returncode == 0 else -1


# etcd's revision log read where a client certificate for etcd exists and the members' names
# resolve (etcd is TLS with client-certificate auth): inside apiserver-2, with
# its etcd client files and the same watch tests/integration/ha/scenarios.etcd_log makes.
_ETCD_LOG = """
import asyncio, json, sys
from skiff.api.kinds import REGISTRY_PREFIX
from skiff.apiserver.storage.etcd import EtcdStorage
from skiff.etcdtls import etcd_tls

async def main(member, ns, since, upto):
    tls = etcd_tls(cafile="/etc/skiff/pki/etcd-ca.crt",
                   certfile="/etc/skiff/pki/etcd-client.crt",
                   keyfile="/etc/skiff/pki/etcd-client.key")
    storage = EtcdStorage(f"https://{member}:2379", request_timeout=5, retry_seconds=10,
                          tls=tls)
    await storage.connect()
    out = []
    try:
        async with asyncio.timeout(30):
            async for raw in storage.watch(f"{REGISTRY_PREFIX}leases/{ns}/",
                                           start_revision=since + 1):
                kind = ("DELETED" if raw.type == "DELETE" else
                        "ADDED" if raw.created or raw.prev is None else "MODIFIED")
                out.append((kind, raw.key.rsplit("/", 1)[1], raw.revision))
                if raw.revision >= upto:
                    break
    finally:
        await storage.close()
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


def _etcd_log(project: HaProject, member: str, ns: str, since: int,
              upto: int) -> list[tuple[str, str, int]]:
    done = project.docker("exec", project.container("apiserver-2"), "python3", "-c",
                          _ETCD_LOG, member, ns, str(since), str(upto), timeout=120)
    return [(str(k), str(n), int(r)) for k, n, r in json.loads(done.stdout)]


async def _scenario1(project: HaProject, api: ApiClient, api1: str, api2: str) -> None:
    t0 = time.monotonic()
    ns = f"s1-{int(time.time())}"
    since = int((await api.create({"apiVersion": "v1", "kind": "Namespace",
                                   "metadata": {"name": ns}}))["metadata"]["resourceVersion"])
    async with ApiClient(api1, retry_seconds=2, timeout=5) as through_1, \
            ApiClient(api2, retry_seconds=10, timeout=10) as through_2, \
            ApiClient(f"{api1},{api2}", retry_seconds=30) as w1, \
            ApiClient(f"{api2},{api1}", retry_seconds=30) as w2:
        watchers = Watchers([w1, w2], "leases", ns, since, count=10)
        writes_1, writes_2, stop = Writes(), Writes(), asyncio.Event()
        log(await asyncio.to_thread(chaos.partition, "etcd", project=project.name))
        try:
            tasks = [asyncio.create_task(write_until(stop, writes_1, through_1, "via-1", ns)),
                     asyncio.create_task(write_until(stop, writes_2, through_2, "via-2", ns))]

            async def served(_: ApiClient) -> bool:
                return len(writes_2.acked) >= 5
            await wait_for(api, "apiserver-2 to serve writes during the cut", served,
                           timeout=90, interval=0.5)
            await asyncio.sleep(3)
            stop.set()
            await asyncio.gather(*tasks)
        finally:
            log(await asyncio.to_thread(chaos.heal, "etcd", project=project.name))
        assert writes_1.bad == [] and writes_2.bad == [], (writes_1.bad, writes_2.bad)
        final = await api.create(lease("final", ns))
        upto = int(final["metadata"]["resourceVersion"])

        async def caught_up(_: ApiClient) -> bool:
            return await asyncio.to_thread(_member_revision, project, "etcd") >= upto
        await wait_for(api, "etcd to catch up after the heal", caught_up, timeout=90)

        async def reached(_: ApiClient) -> bool:
            return await watchers.reached(upto)
        await wait_for(api, "every watcher to reach the last write", reached, timeout=90,
                       interval=0.5)
        await watchers.stop()
        log_ = await asyncio.to_thread(_etcd_log, project, "etcd-2", ns, since, upto)
        for i, rec in enumerate(watchers.recorders):
            got = [s for s in rec.seen if s[2] <= upto]
            assert got == log_, f"watcher {i} differs from etcd's revision log"
        names = {o["metadata"]["name"] for o in (await api.list("leases", ns))["items"]}
        assert set(writes_1.acked) | set(writes_2.acked) <= names, "acknowledged write lost"
    await wait_for(api, "rs whole after scenario 1", _rs_whole, timeout=90)
    assert (await api.list("fences"))["items"] == [], "a node was fenced in scenario 1"
    log(f"scenario 1 done in {time.monotonic() - t0:.1f}s "
        f"({len(writes_1.acked)} acked / {len(writes_1.clean_failures)} clean failures via "
        f"apiserver, {len(writes_2.acked)} via apiserver-2)")


async def requested_pod(api: ApiClient) -> Obj | None:
    try:
        return await api.get("pods", "db-0", "default")
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND:
            return None
        raise


async def _fence_diagnosis(project: HaProject, api: ApiClient, node: str) -> str:
    """Why no Fence came, in the few lines a CI report shows first: each node's Ready
    condition, the controller-manager Lease, the node's Events and what the
    controller-managers logged about leadership, nodes and fencing."""
    lines = []
    for obj in (await api.list("nodes"))["items"]:
        ready: dict[str, Any] = next((c for c in obj.get("status", {}).get("conditions", [])
                      if c.get("type") == "Ready"), {})
        lines.append(f"node {obj['metadata']['name']}: Ready={ready.get('status')} "
                     f"since {ready.get('lastTransitionTime')} ({ready.get('reason')}); "
                     f"taints {[t.get('key') for t in obj['spec'].get('taints') or []]}")
    held = await api.get("leases", "skiff-controller-manager", "kube-system")
    lines.append(f"controller-manager Lease: {held['spec']}")
    events = (await api.list("events"))["items"]
    lines += [f"event {e.get('lastTimestamp') or e.get('eventTime')} {e.get('reason')}: "
              f"{str(e.get('message'))[:160]}" for e in events
              if e.get("involvedObject", {}).get("name") in (node, "db-0")][-12:]
    words = ("leader", "fenc", "node", "disrupt", "lost", "unavailable")
    for cm in CMS:
        out = project.compose("logs", "--no-color", cm, check=False, timeout=60).stdout
        said = [line.partition(" | ")[2][:220] for line in out.splitlines()
                if "skiff.client.informer" not in line and (  # (watch retries: noise)
                    '"WARNING"' in line or '"ERROR"' in line or
                    any(w in line.lower() for w in words))]
        lines += [f"{cm}: {line}" for line in said[-15:]]
    return "\n".join(lines)


async def _scenario4(project: HaProject, api: ApiClient) -> None:
    t0 = time.monotonic()
    pet = await api.get("pods", "db-0", "default")
    node = str(pet["spec"]["nodeName"])
    lease_obj = await api.get("leases", "skiff-controller-manager", "kube-system")
    leader = str(lease_obj["spec"]["holderIdentity"])
    other = next(cm for cm in CMS if cm != leader)
    old_epoch = LeaderEpoch("kube-system", "skiff-controller-manager", leader,
                            int(lease_obj["spec"].get("leaseTransitions") or 0))
    project.compose("stop", "fence-agent")  # the Fence stays Pending: certainly mid-fence
    log(await asyncio.to_thread(chaos.partition, node, project=project.name))

    async def requested(c: ApiClient) -> Obj | None:
        try:
            return await c.get("fences", node)
        except ApiError as err:
            if err.reason == Reason.NOT_FOUND:
                return None
            raise
    # Nominally grace (20 s) + fencing delay (3 s). A starved CI machine can add a leader
    # change and a spell in which every zone looks disrupted (no fence while it lasts, then
    # a fresh grace period and delay), so the wait allows a few of those.
    try:
        fence = await wait_for(api, f"Fence {node} requested", requested, timeout=180,
                               interval=0.5)
    except pytest.fail.Exception as err:
        pytest.fail(f"{err.msg}\n{await _fence_diagnosis(project, api, node)}",
                    pytrace=False)
    assert fence["spec"]["requestedBy"] == f"controller-manager/{leader}"
    for apiserver in ("apiserver", "apiserver-2"):
        log(await asyncio.to_thread(chaos.partition, leader, from_component=apiserver,
                                    project=project.name))
    try:
        async def taken(c: ApiClient) -> bool:
            obj = await c.get("leases", "skiff-controller-manager", "kube-system")
            return bool(obj["spec"]["holderIdentity"] == other)
        await wait_for(api, f"{other} to take the lease", taken, timeout=60, interval=0.5)
        project.compose("start", "fence-agent")

        seen: list[str] = []

        async def replaced(c: ApiClient) -> Obj | None:
            pod = await requested_pod(c)
            if pod is None:
                seen.append("db-0 absent")
                return None
            seen.append(f"db-0 uid {pod['metadata']['uid']} on "
                        f"{pod['spec'].get('nodeName')} {pod.get('status', {}).get('phase')}")
            if pod["metadata"]["uid"] != pet["metadata"]["uid"] and \
                    pod.get("status", {}).get("phase") == "Running":
                return pod
            return None
        try:
            new = await wait_for(api, "db-0 replaced", replaced, timeout=120, interval=0.5)
        except BaseException:
            log(f"db-0 states seen: {sorted(set(seen))}")
            log(project.compose("logs", "--no-color", "--tail", "15", *CMS, "scheduler",
                                "scheduler-2", check=False).stdout[-5000:])
            raise
        assert new["spec"]["nodeName"] != node
        assert not project.running(node), "the old pet's node runs beside its replacement"
        async with ApiClient(f"127.0.0.1:{project.api_port}", retry_seconds=10) as late:
            late.leader_epoch = old_epoch
            with pytest.raises(ApiError) as refused:
                await late.delete("pods", "db-0", "default", grace_period_seconds=0)
            assert refused.value.reason == Reason.CONFLICT
    finally:
        log(await asyncio.to_thread(chaos.heal, leader, project=project.name))
        log(await asyncio.to_thread(chaos.heal, node, project=project.name))
    await asyncio.sleep(5)
    holder = (await api.get("leases", "skiff-controller-manager", "kube-system"))["spec"]
    assert holder["holderIdentity"] == other
    versions = await api.history("fences", node)
    uids = {(v.get("object") or {}).get("metadata", {}).get("uid") for v in versions}
    assert uids - {None} == {fence["metadata"]["uid"]}, f"{node} fenced more than once"
    await wait_for(api, "rs whole after scenario 4", _rs_whole, timeout=120)
    log(f"scenario 4 done in {time.monotonic() - t0:.1f}s")
