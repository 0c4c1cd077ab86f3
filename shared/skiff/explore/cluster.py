"""A fresh cluster for each explore run, made the way a user makes one: `skiff up --detach`
in a data dir of its own, `skiff down` after (in the background, so the next run's cluster
starts while this one stops). All runs share one PKI (copied into each data dir before `skiff
up`, which reuses it), so the controller's client certificate — its identity, the subject of
every perturbation — is minted once and valid in every run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from skiff.client.credentials import Credentials
from skiff.cluster.kubeconfig import cli_credentials
from skiff.cluster.processes import PORT_RANGE_ENV, port_range
from skiff.cluster.state import ClusterState
from skiff.pki import issue_client

__all__ = ["ExploreError", "RunCluster", "slot_port_ranges", "start_cluster", "stop_cluster",
           "wait_stopped"]

CONTROLLER_STEM = "explore-controller"


class ExploreError(RuntimeError):
    """Something `skiff explore` cannot go on from; the message says what to do."""


@dataclass(frozen=True)
class RunCluster:
    data_dir: Path
    api: str  # the apiserver's gRPC target
    credentials: Credentials  # the admin's
    kubeconfig: Path  # the admin's, for kubectl and invariant commands
    controller_kubeconfig: Path  # the controller under test's identity

    def env(self) -> dict[str, str]:
        """What a command run against this cluster needs beside os.environ."""
        return {"SKIFF_DATA_DIR": str(self.data_dir), "SKIFF_SERVER": ""}


def _skiff(data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "skiff.cli.main", "--data-dir", str(data_dir), *args]


def _env(data_dir: Path, port_range: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKIFF_CLIENT_")}
    if port_range:
        env[PORT_RANGE_ENV] = port_range
    return {**env, "SKIFF_DATA_DIR": str(data_dir), "SKIFF_SERVER": ""}


def slot_port_ranges(slots: int) -> list[str]:
    """`SKIFF_PORT_RANGE` (when set) split into one disjoint range per run slot: `skiff up`s
    started at the same moment each go round their range from a random start, and two
    clusters sharing one range could both pick a port (a failed bind, seen in CI). Unset:
    the kernel picks every port, and every slot leaves it so ("")."""
    span = os.environ.get(PORT_RANGE_ENV, "")
    if not span or slots <= 1:
        return [span] * max(slots, 1)
    low, high = port_range(span)
    size = (high - low) // slots
    if size < 64:
        raise ExploreError(f"{PORT_RANGE_ENV}={span} is too small for {slots} clusters at "
                           "once; widen it or lower --parallel")
    return [f"{low + i * size}-{low + (i + 1) * size}" for i in range(slots)]


async def start_cluster(data_dir: Path, *, nodes: int, config: Path | None,
                        pki: Path | None, user: str, groups: tuple[str, ...],
                        timeout: float = 120.0, ports: str = "") -> RunCluster:
    """`skiff up --detach` in `data_dir` (with `pki` copied in first when given; `ports` a
    SKIFF_PORT_RANGE of its own); the controller's kubeconfig (`user`, `groups`) is written
    beside the admin's."""
    data_dir.mkdir(parents=True, exist_ok=True)
    if pki is not None and pki.is_dir() and not (data_dir / "pki").exists():
        shutil.copytree(pki, data_dir / "pki")
    args = ["up", "--detach", "--nodes", str(nodes), "--restart-backoff", "1",
            "--restart-backoff-max", "2"]
    if config is not None:
        args += ["--config", str(config)]
    proc = await asyncio.create_subprocess_exec(
        *_skiff(data_dir, *args), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL,
        env=_env(data_dir, ports))
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        await _stopped(data_dir)
        raise ExploreError(f"`skiff up` in {data_dir} did not finish within {timeout:g}s; "
                           f"see {data_dir / 'logs'}") from None
    state = ClusterState.load(data_dir)
    if proc.returncode != 0 or state is None:
        tail = "\n".join(out.decode(errors="replace").splitlines()[-8:])
        await _stopped(data_dir)
        raise ExploreError(f"`skiff up` in {data_dir} failed (exit {proc.returncode}):\n"
                           f"{tail}")
    kubeconfig = data_dir / "kubeconfig"
    return RunCluster(data_dir, state.api.split(",")[0], cli_credentials(kubeconfig),
                      kubeconfig, controller_kubeconfig(data_dir, user=user, groups=groups))


def controller_kubeconfig(data_dir: Path, *, user: str, groups: tuple[str, ...]) -> Path:
    """The admin's kubeconfig with the user swapped for a client certificate of `user` in
    `groups`, issued by the cluster's CA (kept in the PKI, so later runs reuse it)."""
    pki = data_dir / "pki"
    if not (pki / f"{CONTROLLER_STEM}.crt").exists():
        issue_client(pki, CONTROLLER_STEM, user=user, groups=groups)
    pair_cert, pair_key = pki / f"{CONTROLLER_STEM}.crt", pki / f"{CONTROLLER_STEM}.key"
    config = json.loads((data_dir / "kubeconfig").read_text())
    for entry in config.get("users") or []:
        entry["user"] = {"client-certificate": str(pair_cert), "client-key": str(pair_key)}
    path = data_dir / "controller.kubeconfig"
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


def stop_cluster(data_dir: Path) -> subprocess.Popen[bytes]:
    """`skiff down` for `data_dir`, started and not waited for (see `wait_stopped`)."""
    return subprocess.Popen(_skiff(data_dir, "down"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=_env(data_dir))


async def _stopped(data_dir: Path, timeout: float = 60.0) -> None:
    """`skiff down` waited for off the event loop (the other runs go on meanwhile)."""
    await asyncio.to_thread(wait_stopped, [stop_cluster(data_dir)], timeout=timeout)


def wait_stopped(stopping: list[subprocess.Popen[bytes]], *, timeout: float = 60.0) -> None:
    for proc in stopping:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    stopping.clear()
