"""A CRD created through one apiserver is served by every apiserver of the cluster, and by
one that restarts, from the moment it serves (SPEC EX1): each apiserver's CRD controller
follows the CRDs in its own watch cache, and serves the stored ones before it answers."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skiff.cluster.kubeconfig import write_kubeconfig
from skiff.cluster.processes import free_port
from tests.integration.crontabs import crontab, crontab_crd
from tests.integration.kubectl import kubectl
from tests.integration.twoapiservers import TwoApiservers, two_apiservers

GROUP = "ha.example.com"


@pytest.fixture
def two(tmp_path: Path) -> Iterator[TwoApiservers]:
    http1, http2 = free_port(), free_port()
    with two_apiservers(tmp_path, ["--http-port", str(http1)], ["--http-port", str(http2)],
                        http_ports=(http1, http2)) as both:
        yield both


def _config(root: Path, name: str, port: int) -> Path:
    folder = root / name
    folder.mkdir()
    return write_kubeconfig(folder, f"http://127.0.0.1:{port}")


def _eventually(config: Path, *args: str, stdin: str | None = None) -> str:
    deadline = time.monotonic() + 20
    while True:
        result = kubectl(config, *args, stdin=stdin)
        if result.returncode == 0 or time.monotonic() > deadline:
            assert result.returncode == 0, result.stderr
            return result.stdout
        time.sleep(0.3)


def test_ex1_a_crd_made_through_one_apiserver_is_served_by_the_other(
        two: TwoApiservers, tmp_path: Path) -> None:
    first = _config(tmp_path, "first", two.http_ports[0])
    second = _config(tmp_path, "second", two.http_ports[1])
    _eventually(first, "apply", "-f", "-", stdin=crontab_crd(GROUP))
    _eventually(second, "apply", "-f", "-",
                stdin=crontab("made-on-two", "default", group=GROUP, cronSpec="* * * * *"))
    got = json.loads(_eventually(first, "get", f"crontabs.{GROUP}", "made-on-two", "-o",
                                 "json"))
    assert got["spec"]["replicas"] == 1  # defaulted by the second apiserver's schema
    # a restarted apiserver serves the stored CRD as soon as it answers
    two.second.stop()
    two.second.start()
    deadline = time.monotonic() + 30
    while kubectl(second, "get", "--raw", "/readyz").returncode != 0:
        assert time.monotonic() < deadline, "the second apiserver did not come back"
        time.sleep(0.2)
    listed = kubectl(second, "get", f"crontabs.{GROUP}", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    assert [o["metadata"]["name"] for o in json.loads(listed.stdout)["items"]] == [
        "made-on-two"]
