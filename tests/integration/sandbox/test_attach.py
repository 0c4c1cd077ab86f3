"""SPEC SB4 pods/attach with the real kubectl: a container with `stdin: true` keeps its
stdin open; `kubectl attach -i` feeds it and prints what the container answers, and
`kubectl run -i --rm --restart=Never` creates the pod, attaches, prints the output and
removes the pod afterwards."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

from skiff.client import ApiClient
from tests.integration.sandbox.conftest import SandboxCluster
from tests.integration.sandbox.test_pod_network import _pod
from tests.integration.waiting import get_or_none, wait_for


async def test_sb4_kubectl_attach_feeds_stdin_and_prints_the_containers_answer(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    pod = _pod("reader", sb_namespace, sandbox_cluster.nodes[0].name, [{
        "name": "main", "image": "busybox", "stdin": True,
        "command": ["sh", "-c", 'read line; echo "got $line from $(hostname)"']}])
    await sb_api.create(pod)

    async def running() -> bool:
        got = await get_or_none(sb_api, "pods", "reader", sb_namespace)
        return got is not None and got["status"].get("phase") == "Running"
    await wait_for(running, timeout=120, what="pod reader Running")
    ran = sandbox_cluster.kubectl("attach", "-i", "-n", sb_namespace, "reader",
                                  stdin="hello\n", timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "got hello from reader" in ran.stdout, (ran.stdout, ran.stderr)
    await sb_api.delete("pods", "reader", sb_namespace)


async def test_sb4_kubectl_run_i_rm_attaches_and_removes_the_pod(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    # no scheduler runs in this cluster: the pod is placed with --overrides
    overrides = json.dumps({"apiVersion": "v1",
                            "spec": {"nodeName": sandbox_cluster.nodes[1].name,
                                     "terminationGracePeriodSeconds": 1}})
    ran = sandbox_cluster.kubectl(
        "run", "-i", "--rm", "--restart=Never", "--image=busybox", "-n", sb_namespace,
        f"--overrides={overrides}", "once", "--", "sh", "-c", "read l; echo got $l",
        stdin="hi there\n", timeout=100)
    assert ran.returncode == 0, (ran.stdout, ran.stderr)
    assert "got hi there" in ran.stdout, (ran.stdout, ran.stderr)
    assert "Traceback" not in ran.stderr

    async def gone() -> bool:
        return await get_or_none(sb_api, "pods", "once", sb_namespace) is None
    await wait_for(gone, timeout=60, what="pod once removed by --rm")


async def test_sb4_kubectl_run_it_rm_with_a_terminal(
        sb_api: ApiClient, sb_namespace: str, sandbox_cluster: SandboxCluster) -> None:
    # `script` gives kubectl a terminal, as a user's shell would; what is typed is fed in
    overrides = json.dumps({"apiVersion": "v1",
                            "spec": {"nodeName": sandbox_cluster.nodes[0].name,
                                     "terminationGracePeriodSeconds": 1}})
    inner = (f"kubectl --kubeconfig {sandbox_cluster.kubeconfig} run -it --rm "
             f"--restart=Never --image=busybox -n {sb_namespace} --overrides='{overrides}' "
             "term -- sh -c 'read l; echo got $l; exit 0'")
    typist = subprocess.Popen(["script", "-qec", inner, "/dev/null"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        out = b""
        assert typist.stdout is not None and typist.stdin is not None
        # type the line once kubectl has attached (it says so), as a user would
        os.set_blocking(typist.stdout.fileno(), False)
        deadline = time.monotonic() + 60
        while b"pressing enter" not in out and time.monotonic() < deadline:
            if typist.poll() is not None:
                break
            chunk = typist.stdout.read() or b""
            out += chunk
            if not chunk:
                await asyncio.sleep(0.1)
        typist.stdin.write(b"typed here\r")
        typist.stdin.flush()
        os.set_blocking(typist.stdout.fileno(), True)
        rest, _ = await asyncio.to_thread(typist.communicate, timeout=30)
        out += rest
    finally:
        if typist.poll() is None:
            typist.kill()
            typist.wait()
    text = out.decode(errors="replace")
    assert typist.returncode == 0, text
    assert "got typed here" in text, text

    async def gone() -> bool:
        return await get_or_none(sb_api, "pods", "term", sb_namespace) is None
    await wait_for(gone, timeout=60, what="pod term removed by --rm")
