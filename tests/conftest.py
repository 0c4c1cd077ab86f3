"""Shared test setup: mark the integration tests, give parallel workers their own ports,
remove the pod sandboxes the run left, and fail any test that leaves asyncio tasks running."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

INTEGRATION = Path(__file__).parent / "integration"
COMPOSE = INTEGRATION / "compose"


WORKER_PORTS = 4000  # loopback ports per pytest-xdist worker, below the kernel's ephemeral range
FIRST_PORT = 12000


def pytest_configure(config: pytest.Config) -> None:
    """Each pytest-xdist worker (gw0, gw1, ...) hands out ports from a range of its own, so
    clusters of parallel tests never collide on a port picked and not yet bound (processes
    the tests start inherit the range)."""
    from skiff.cluster.processes import PORT_RANGE_ENV

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        low = FIRST_PORT + int(worker[2:]) * WORKER_PORTS
        if low + WORKER_PORTS > 32768:
            raise pytest.UsageError(f"too many xdist workers for the port plan ({worker})")
        os.environ[PORT_RANGE_ENV] = f"{low}-{low + WORKER_PORTS}"


def _skiff_namespaces() -> set[str]:
    if not Path("/run/netns").is_dir():
        return set()
    return {p.name for p in Path("/run/netns").iterdir()
            if p.name.startswith(("skiff-pod-", "skiff-podnet"))}


def _made_here(basetemp: Path) -> set[str]:
    """The pod namespaces the kubelets of this run's clusters recorded (their IPAM files
    under this run's temp dir), and the pod networks of its data dirs: other runs (other
    checkouts on the machine) have clusters at the same time, and theirs are theirs."""
    from skiff.cluster.sandboxes import pod_network_namespace

    names: set[str] = set()
    for entry in basetemp.glob("**/ipam/*/*"):
        with contextlib.suppress(OSError):
            names.add(f"skiff-pod-{entry.read_text().strip()}")
    for directory in [basetemp, *basetemp.glob("*"), *basetemp.glob("*/*"),
                      *basetemp.glob("*/*/*")]:  # xdist: <base>/popen-gwN/<test dir>
        if directory.is_dir():
            names.add(pod_network_namespace(directory))
    return names


_NAMESPACES_BEFORE = pytest.StashKey[set[str]]()


def pytest_sessionstart(session: pytest.Session) -> None:
    if not hasattr(session.config, "workerinput"):  # the controller, or a run without xdist
        session.config.stash[_NAMESPACES_BEFORE] = _skiff_namespaces()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Test clusters stop their kubelets without `skiff down`, which is what removes pod
    sandboxes: once every worker is done, remove the pod network namespaces this run made
    (only those; a worker must not, its neighbours' pods may still run)."""
    before = session.config.stash.get(_NAMESPACES_BEFORE, None)
    if before is None:
        return
    _end_leftover_processes(session)
    base = session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
    _stop_private_engine(base)
    _remove_node_cgroups(base)
    leftover = (_skiff_namespaces() - before) & _made_here(base)
    if leftover:
        from pyroute2 import netns

        for name in sorted(leftover):
            with contextlib.suppress(OSError):
                netns.remove(name)


def _remove_node_cgroups(base: Path) -> None:
    """The cgroup trees this run's kubelets made (each records its node's directories in
    `<root-dir>/cgroups`, as `skiff down` reads them): test clusters stop kubelets without
    `skiff down`, and their empty node trees would stay in the host's hierarchies."""
    from skiff.cgroupfs import RECORD_FILE, remove_recorded

    roots = {path.parent for path in base.rglob(RECORD_FILE) if path.is_file()
             and path.read_text().startswith("/sys/fs/cgroup/")}
    remove_recorded(roots)


ENGINE_STARTED = "docker-engine-started"  # written by the compose tests' engine fixture


def _stop_private_engine(base: Path) -> None:
    """The private Docker engine the compose tests started in this run, stopped once every
    worker is done: a worker's own session end comes while another worker's compose test
    may still use the engine (three full runs lost their engine mid-test that way)."""
    if not (base / ENGINE_STARTED).exists():
        return
    import subprocess

    script = Path(__file__).resolve().parent.parent / "deploy" / "compose" / "dockerd.sh"
    subprocess.run([str(script), "stop"], capture_output=True, timeout=120, check=False)


def _end_leftover_processes(session: pytest.Session) -> None:
    """Every process a test starts lives in the run's temporary directory (its data dir on
    the command line, or its working directory: pods run in their kubelet's root). A test
    that fails half-way may leave a cluster behind; end those processes (SIGKILL) so a
    failure does not slow the rest of the machine, and say which were left."""
    base = str(session.config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    mine, left = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == mine:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if base + "/" in argv or cwd.startswith(base + "/"):
            left.append((int(entry.name), argv[:120]))
    for pid, _ in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"ended {len(left)} processes the tests left running:")
            for pid, argv in left[:20]:
                reporter.write_line(f"  {pid} {argv}")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/integration needs real etcd and real processes:
    `pytest -m "not integration"` is the fast unit run."""
    for item in items:
        if INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.integration)
        if COMPOSE in item.path.parents:
            # One private Docker engine serves every compose test: under pytest-xdist
            # (`--dist loadgroup`) they run on one worker (pytest is kept below 9.2, whose
            # nodeid ignores the group xdist 3.8 writes). The engine is stopped by the
            # controller (`_stop_private_engine`), never by a worker, so it holds even
            # when `-n` and the groups are not used as the Makefile uses them.
            item.add_marker(pytest.mark.xdist_group("docker"))
        elif _uses_module_fixture(item):
            # A cluster shared by a module's tests is made once only if they run on one
            # worker; the other tests go to whichever worker is free.
            item.add_marker(pytest.mark.xdist_group(str(item.path)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """xdist schedules a group by the `@group` suffix it adds to each grouped test's nodeid;
    if a pytest/xdist pair drops the suffix the groups silently hold nothing (as pytest 9.2
    with xdist 3.8 did), clusters are built once per worker and the Docker engine is shared
    across workers. Refuse to run rather than run that way."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist groups do not hold with pytest {pytest.__version__} "
            f"(e.g. {lost[0]} has no @group): install the versions pyproject.toml pins")


def _uses_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope in ("module", "package")
               for defs in info.name2fixturedefs.values() for d in defs)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter,
                            config: pytest.Config) -> None:
    """pytest-randomly shuffles the order; say the seed even under -q, so a failure that
    depends on the order can be replayed."""
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.has_plugin("randomly"):
        terminalreporter.write_line(f"test order: replay with --randomly-seed={seed}")


def _grpc_internal(task: asyncio.Task[object]) -> bool:
    """grpc.aio's own unnamed tasks (a call's status handling) finish after the call is
    cancelled, on the library's schedule; every task the project starts has a name, so
    only these are let off: by where their code lives, not by their default name."""
    running = re.search(r"coro=<([^>]*)>", repr(task))  # "... running at <file>"
    return task.get_name().startswith("grpc") or bool(running and "grpc" in running[1])


@pytest.fixture(autouse=True)
async def _no_leaked_tasks() -> AsyncIterator[None]:
    before = set(asyncio.all_tasks())
    yield
    await asyncio.sleep(0)
    leaked = [t for t in asyncio.all_tasks() - before
              if not t.done() and t is not asyncio.current_task() and not _grpc_internal(t)]
    for t in leaked:
        t.cancel()
    assert not leaked, f"test left tasks running: {[t.get_name() for t in leaked]}"
