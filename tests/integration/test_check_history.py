"""`skiff check history` against real clusters (issue 35, item 3): the workload of
concurrent compare-and-set updates, consistent and resourceVersion=0 reads and resumed
watches, through two real apiservers over one etcd, shows no anomaly; a stale view on the
checker's own identity shows up as stale cached reads (allowed) and nothing forbidden; an
apiserver killed and restarted mid-run loses nothing."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from skiff.checker.history import History, check
from skiff.checker.history.model import OK, UNKNOWN, WRITE, Op
from skiff.checker.history.runner import run_workload
from skiff.client import ApiClient
from skiff.cluster.chaos.perturb import heal, stale_view
from skiff.cluster.state import ClusterState
from tests.integration.auth.conftest import start_secure_cluster
from tests.integration.cluster import Cluster
from tests.integration.skiffcli import skiff
from tests.integration.twoapiservers import two_apiservers

pytestmark = pytest.mark.integration


async def _namespace(api: ApiClient, name: str) -> str:
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def test_ct3_check_history_through_two_apiservers_finds_no_anomaly(tmp_path: Path) -> None:
    with two_apiservers(tmp_path, [], []) as two:
        async with ApiClient(two.cluster.api_target, retry_seconds=20) as api:
            ns = await _namespace(api, "history")
        history = await run_workload(targets=[two.cluster.api_target, two.second_target],
                                     duration=6, keys=4, workers=4, namespace=ns)
    report = check(history)
    writes = [op for op in history.ops if op.kind == WRITE and op.outcome == OK]
    assert len(writes) > 20, report.format()
    assert {op.server for op in writes} == {two.cluster.api_target, two.second_target}
    assert {w.server for w in history.watch} == {two.cluster.api_target, two.second_target}
    assert len([w for w in history.watch if w.type == "MODIFIED"]) >= 2 * len(writes)
    assert report.forbidden == 0, report.format()


async def test_ct3_check_history_reports_a_stale_view_as_stale_cached_reads(
        tmp_path: Path) -> None:
    with start_secure_cluster(tmp_path) as cluster:
        pair = cluster.user("history-checker", "system:masters")
        async with cluster.client(cluster.pki.admin) as admin:
            ns = await _namespace(admin, "history")
            name = await stale_view(admin, user="history-checker", lag_revisions=5)
            try:
                history = await run_workload(targets=[cluster.api_target], duration=5,
                                             keys=2, workers=4, namespace=ns,
                                             drain_seconds=0.5,
                                             credentials=cluster.credentials(pair))
            finally:
                await heal(admin, name)
    report = check(history)
    assert report.counts().get("stale-cached-read", 0) > 0, report.format()
    assert "stale-cached-read (allowed)" in report.format()
    assert report.forbidden == 0, report.format()


async def test_ct3_check_history_across_an_apiserver_kill_loses_nothing(
        fresh_cluster: Cluster) -> None:
    cluster = fresh_cluster.start()
    async with ApiClient(cluster.api_target, retry_seconds=20) as api:
        ns = await _namespace(api, "history")
    # 16 s: the kill at 3 s, and a restart that may take several seconds on a loaded
    # machine still leaves the restarted apiserver time to acknowledge writes
    run = asyncio.ensure_future(run_workload(targets=[cluster.api_target], duration=16,
                                             keys=3, workers=4, namespace=ns, timeout=2))
    await asyncio.sleep(3)
    cluster.apiserver.kill()
    killed = time.time()
    await asyncio.sleep(0.5)
    await asyncio.to_thread(cluster.start_apiserver)
    history = await run
    report = check(history)
    assert any(op.outcome == UNKNOWN for op in history.ops)  # the kill was seen
    after = [op for op in history.ops if op.kind == WRITE and op.outcome == OK
             and op.invoke > killed]
    assert after, "no write was acknowledged after the restart"
    # the watchers resumed on the restarted apiserver and delivered those writes too
    assert {w.rv for w in history.watch if w.time > killed} >= {op.rv for op in after}
    assert report.forbidden == 0, report.format()


async def test_ct3_skiff_check_history_cli_reports_and_exits_1_on_a_forbidden_anomaly(
        tmp_path: Path) -> None:
    saved = tmp_path / "history.json"
    with two_apiservers(tmp_path, [], []) as two:
        async with ApiClient(two.cluster.api_target, retry_seconds=20) as api:
            await _namespace(api, "history")
        servers = f"{two.cluster.api_target},{two.second_target}"
        done = await asyncio.to_thread(
            skiff, tmp_path / "data", "--server", servers, "check", "history",
            "--duration", "2s", "--keys", "2", "--workers", "2", "-n", "history",
            "--save", str(saved), timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"through {two.cluster.api_target}, {two.second_target}" in done.stdout
    assert "0 forbidden anomalies: the history is consistent" in done.stdout
    # The same history with one acknowledged write that nothing ever saw: lost.
    raw = json.loads(saved.read_text())
    last = max(raw["final"], key=lambda o: o["rv"])
    end = max(op["complete"] for op in raw["ops"])  # after every read: no read is stale
    raw["ops"].append(asdict(Op(9, WRITE, last["key"], end + 1, end + 2, OK, value="lost",
                                rv=last["rv"] + 1000, prev_rv=last["rv"])))
    saved.write_text(json.dumps(raw))
    again = await asyncio.to_thread(skiff, tmp_path / "data", "check", "history",
                                    "--from", str(saved), timeout=30)
    assert again.returncode == 1, again.stdout + again.stderr
    assert "lost-write" in again.stdout and "'lost'" in again.stdout
    assert "1 forbidden anomaly" in again.stdout


@pytest.mark.timeout(240)
async def test_ct3_skiff_check_history_on_an_ha_cluster_under_member_kills_finds_nothing(
        tmp_path: Path) -> None:
    """The issue's CI run without --netns: `skiff up --ha`, then `skiff check history`
    while the etcd leader, an apiserver and an etcd follower are SIGKILLed (the supervisor
    brings each back)."""
    data = tmp_path / "ha"
    data.mkdir()
    up = await asyncio.to_thread(skiff, data, "up", "--ha", "--detach", "--nodes", "0",
                                 "--restart-backoff", "1", "--restart-backoff-max", "2")
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        run = asyncio.ensure_future(asyncio.to_thread(
            skiff, data, "check", "history", "--duration", "9s", "--keys", "3",
            "--workers", "4", "--op-timeout", "3", "--save", str(tmp_path / "h.json"),
            timeout=120))
        roles = await asyncio.to_thread(skiff, data, "status")
        leader = next(line.split()[0] for line in roles.stdout.splitlines()
                      if line.startswith("etcd-") and " leader " in line)
        follower = next(f"etcd-{i}" for i in (1, 2, 3) if f"etcd-{i}" != leader)
        for member in (leader, "apiserver-1", follower):
            await asyncio.sleep(2.5)
            killed = await asyncio.to_thread(skiff, data, "chaos", "kill", member)
            assert killed.returncode == 0, killed.stderr
        done = await run
        state = ClusterState.load(data)
    finally:
        await asyncio.to_thread(skiff, data, "down")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 forbidden anomalies: the history is consistent" in done.stdout
    history = History.from_json((tmp_path / "h.json").read_text())
    assert state is not None  # both apiservers served the workload, the killed one too
    assert {op.server for op in history.ops if op.outcome == OK} == set(state.api.split(","))
