"""What `skiff up` started comes back when it dies, as the kubelet restarts static pods.

The supervisor reads `<data-dir>/cluster.json` (the source of truth for PIDs, which the fence
agent also updates) a few times a second. A component whose recorded process is gone is
started again with its recorded argv, environment and log, after a CrashLoopBackOff-style
delay: the first restart at once, then `initial` seconds doubling up to `maximum` (10 s and
300 s, as the kubelet), the count reset once it ran for twice `maximum`. Every restart adds one
to the component's `restarts` in cluster.json, which `skiff status` shows.

It leaves alone what must stay down: a component `skiff chaos stop` holds (marker
`<data-dir>/supervisor/stopped/<name>`, removed by `skiff chaos start`) and the kubelet of a
node the fence agent fenced (`<data-dir>/fenced/<node>`; the agent itself starts it again).

`skiff up` runs it in its own loop in the foreground; `skiff up --detach` starts it as a
small process (`python -m skiff.cluster.supervisor`, its PID in cluster.json) that `skiff down`
stops first, so nothing it would restart is stopped behind its back.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from skiff.cluster.netns.commands import GATEWAY_MODULE, ns_exec
from skiff.cluster.processes import Process, python_module
from skiff.cluster.state import STATE_FILE, ClusterState, Component, pid_alive, same_process

STOPPED_DIR = Path("supervisor") / "stopped"
LOCK_FILE = "cluster.lock"
MODULE = "skiff.cluster.supervisor"
TICK_SECONDS = 0.2


@dataclass(frozen=True)
class Backoff:
    """CrashLoopBackOff's schedule: restart n (n >= 1 in a row) waits initial * 2^(n-2)."""

    initial: float = 10.0
    maximum: float = 300.0

    def delay(self, crashes_in_a_row: int) -> float:
        if crashes_in_a_row <= 1:
            return 0.0
        return float(min(self.initial * 2 ** (crashes_in_a_row - 2), self.maximum))


def stopped_marker(data_dir: Path, name: str) -> Path:
    return data_dir / STOPPED_DIR / name


def clear_stopped(data_dir: Path) -> None:
    """Forget `skiff chaos stop` hold-downs of an earlier cluster in this data dir."""
    stopped = data_dir / STOPPED_DIR
    for marker in stopped.glob("*") if stopped.is_dir() else []:
        marker.unlink(missing_ok=True)


@contextlib.contextmanager
def state_lock(data_dir: Path) -> Iterator[None]:
    """Serialises read-modify-write of cluster.json among Skiff's CLI processes."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def held_down(data_dir: Path, comp: Component) -> bool:
    """Whether `comp` must stay down: stopped by `skiff chaos stop`, or a fenced kubelet."""
    if stopped_marker(data_dir, comp.name).exists():
        return True
    node = comp.name.removeprefix("kubelet-")
    return node != comp.name and (data_dir / "fenced" / node).exists()


def restartable(comp: Component) -> bool:
    """Recorded with its argv, and not a --netns gateway (it holds sockets handed over
    by `skiff up`, which a new process cannot get back)."""
    return bool(comp.argv) and not (comp.name == "gateway" and GATEWAY_MODULE in comp.argv)


@dataclass
class Supervisor:
    data_dir: Path
    backoff: Backoff = field(default_factory=Backoff)
    echo: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    children: list[Process] = field(default_factory=list)  # ours to reap
    _crashes: dict[str, int] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)
    _up_since: dict[str, float] = field(default_factory=dict)

    def tick(self) -> None:
        """One pass: note what is up, schedule what died, restart what is due."""
        self._reap()
        state = ClusterState.load(self.data_dir)
        if state is None:
            return
        now = self.clock()
        for comp in state.components:
            if same_process(comp):
                self._due.pop(comp.name, None)
                since = self._up_since.setdefault(comp.name, now)
                if now - since >= 2 * self.backoff.maximum:
                    self._crashes.pop(comp.name, None)
                continue
            self._up_since.pop(comp.name, None)
            if held_down(self.data_dir, comp) or not restartable(comp):
                self._due.pop(comp.name, None)
                self._crashes.pop(comp.name, None)  # a stop is not a crash
                continue
            if comp.name not in self._due:
                crashes = self._crashes[comp.name] = self._crashes.get(comp.name, 0) + 1
                delay = self.backoff.delay(crashes)
                self._due[comp.name] = now + delay
                self.echo(f"{comp.name} (pid {comp.pid}) exited; restarting it"
                          + (f" in {delay:.0f}s (back-off)" if delay else ""))
            if now >= self._due[comp.name]:
                self._restart(comp)

    def _restart(self, comp: Component) -> None:
        with state_lock(self.data_dir):
            state = ClusterState.load(self.data_dir)
            current = next((c for c in state.components if c.name == comp.name),
                           None) if state else None
            if state is None or current is None or same_process(current) or \
                    held_down(self.data_dir, current):
                return  # replaced (e.g. by the fence agent) or held meanwhile
            argv = current.argv
            if current.netns:  # `skiff up --netns`: back into its host's namespace
                argv = ns_exec(current.netns, argv)
            proc = Process(current.name, argv, Path(current.log), env=current.env)
            proc.start()
            assert proc.pid is not None
            self.children.append(proc)
            current.pid = proc.pid
            current.restarts += 1
            state.save(self.data_dir)
        self._due.pop(comp.name, None)
        self.echo(f"{comp.name} started again: pid {proc.pid} (restarts: {current.restarts})")

    def _reap(self) -> None:
        for proc in list(self.children):
            if not proc.alive():  # poll() reaps it
                self.children.remove(proc)

    def run(self, should_stop: Callable[[], bool]) -> None:
        while not should_stop():
            self.tick()
            time.sleep(TICK_SECONDS)


# -- the detached supervisor process ---------------------------------------------------


def spawn_detached(data_dir: Path, backoff: Backoff) -> int:
    """Start the supervisor process for a `skiff up --detach` cluster; returns its PID."""
    log = data_dir / "logs" / "supervisor.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*python_module(MODULE), "--data-dir", str(data_dir),
             "--backoff", str(backoff.initial), "--backoff-max", str(backoff.maximum)],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    return proc.pid


def is_supervisor(argv: list[str], data_dir: Path | None = None) -> bool:
    """Whether a command line is a cluster's supervisor: the detached one
    (`python -m skiff.cluster.supervisor --data-dir DIR`, DIR matching when given) or a
    foreground `skiff up`. Its words, not a substring: on a busy machine a stale PID is
    soon another program's, and "skiff" alone matches any path holding it (the private
    dockerd's /var/lib/skiff-docker, another cluster's data dir)."""
    if MODULE in argv:
        at = argv.index("--data-dir") + 1 if "--data-dir" in argv else 0
        return data_dir is None or (0 < at < len(argv)
                                    and Path(argv[at]).resolve() == data_dir.resolve())
    named = any(Path(word).name == "skiff" or word == "skiff.cli.main" for word in argv[:4])
    return named and "up" in argv


def _is_supervisor(pid: int, data_dir: Path | None) -> bool:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid_alive(pid)  # no /proc here: the PID alone
    return is_supervisor([w.decode(errors="replace") for w in raw.split(b"\0")[:-1]],
                         data_dir)


def stop_supervisor(pid: int, *, timeout: float, data_dir: Path | None = None) -> list[str]:
    """SIGTERM the supervisor (SIGKILL after `timeout`), if that PID still is one (of the
    cluster in `data_dir`, when given)."""
    if pid <= 0 or not pid_alive(pid) or not _is_supervisor(pid, data_dir):
        return []
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return [f"{'supervisor':<22} pid {pid:<8} stopped"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}",
                                     description="restart what `skiff up` started")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--backoff", type=float, default=10.0)
    parser.add_argument("--backoff-max", type=float, default=300.0)
    args = parser.parse_args(argv)
    data_dir = Path(args.data_dir)
    stop = {"flag": False}

    def on_signal(*_: object) -> None:
        stop["flag"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def echo(line: str) -> None:
        print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}", flush=True)

    supervisor = Supervisor(data_dir, Backoff(args.backoff, args.backoff_max), echo=echo)
    missing_since: float | None = None

    def should_stop() -> bool:
        nonlocal missing_since
        if stop["flag"]:
            return True
        # The cluster is gone (cluster.json removed, e.g. by an older `skiff down`).
        if (data_dir / STATE_FILE).exists():
            missing_since = None
            return False
        missing_since = missing_since or time.monotonic()
        return time.monotonic() - missing_since > 5.0

    echo(f"supervising the cluster in {data_dir} (back-off {args.backoff:g}s to "
         f"{args.backoff_max:g}s)")
    supervisor.run(should_stop)
    echo("supervisor stopped")


if __name__ == "__main__":
    main()
