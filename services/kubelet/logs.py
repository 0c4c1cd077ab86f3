"""The kubelet's log service (what `skiff logs` calls): `/skiff.v1.Kubelet/Logs`.

Served on the kubelet's health port beside gRPC health. A msgpack request
`{"namespace", "name", "container", "tailLines", "previous"}` answers `{"text": str}` from
the container's log file (`previous` = the attempt before the current one); an unknown pod
or container is NotFound, carried as an `ApiError` exactly like the apiserver's errors.
`/skiff.v1.Kubelet/LogsFollow` streams `{"text"}` pieces: the log so far, then what the
container writes, until it exits (no process holds its log file any more, or it was
restarted into a new attempt, or the pod is gone) or the caller cancels. The client side
is `skiff.client.logs`.

Rotation (SPEC AU10), as Kubernetes' container log manager: every
`containerLogMonitorInterval` a running container's log larger than `containerLogMaxSize`
becomes `<attempt>.log.<YYYYmmdd-HHMMSS>`, rotated files but the newest are gzipped, and at
most `containerLogMaxFiles` files (the current one included) are kept; of earlier attempts
only the previous one's logs stay (container garbage collection keeps one dead container).
A Skiff container writes its log file itself (opened with O_APPEND, so it survives a
kubelet restart, GT8), so there is no runtime to ask to reopen it: the file is copied, then
the container is frozen (its cgroup's freezer) while the last bytes are copied, the file is
truncated and the copy takes its rotated name, and thawed: nothing is lost. Without cgroups
the copy of the last bytes and the truncation follow each other on the kubelet's event loop,
and only what the container writes between the two system calls can be lost. `logs` reads
the current file, as Kubernetes' does; `logs -f` notices a new rotated file and reads the
rest of what it held from it before going on with the current file from its start.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from skiff.api.errors import ApiError
from skiff.client.logs import LOGS_METHOD, SERVICE, fetch_logs
from skiff.kubelet.cgroups import ContainerCgroup
from skiff.kubelet.locate import first_located
from skiff.rpc.codec import CodecError, decode_map, encode
from skiff.rpc.errors import to_grpc

__all__ = ["LOGS_METHOD", "LogRotation", "LogService", "RotationTarget", "drop_old_attempts",
           "fetch_logs",
           "follow_log", "read_log", "rotated_logs", "running_logs"]

log = logging.getLogger(__name__)

FOLLOW_POLL_SECONDS = 0.2

# (namespace, name, container | None, previous) → the log file, or ApiError(NotFound).
LogLocator = Callable[[str, str, str | None, bool], Path]


def _is_written(path: Path) -> bool:
    """Whether any other process (the container) still holds the log file open: the
    kernel's view, so it needs no word from the pod worker. The kubelet's own descriptors
    (followers reading the file) do not count."""
    try:
        target = os.stat(path)
    except FileNotFoundError:
        return False
    me = str(os.getpid())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == me:
            continue
        try:
            for fd in (proc / "fd").iterdir():
                try:
                    st = os.stat(fd)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                    return True
        except OSError:
            continue
    return False


def _rotation_key(name: str) -> tuple[str, int]:
    """`<stamp>[-<n>][.gz]` → (stamp, n): rotations within one second stay in order."""
    stamp, _, count = name.removesuffix(".gz").partition("-")
    second, _, n = count.partition("-")
    return f"{stamp}-{second}", int(n) if n.isdigit() else 0


def rotated_logs(path: Path) -> list[Path]:
    """The rotated files of log `path`, oldest first (`.gz` ones included)."""
    prefix = path.name + "."
    found = [p for p in path.parent.glob(prefix + "*")
             if p.name[len(prefix):len(prefix) + 1].isdigit() and not p.name.endswith(".tmp")]
    return sorted(found, key=lambda p: _rotation_key(p.name[len(prefix):]))


def _rotation_id(path: Path) -> str:
    return path.name.removesuffix(".gz")


def _read_rotated(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:  # gzipped meanwhile
        try:
            data = path.with_name(path.name + ".gz").read_bytes()
        except OSError:
            return b""
        path = path.with_name(path.name + ".gz")
    except OSError:
        return b""
    return gzip.decompress(data) if path.suffix == ".gz" else data


async def follow_log(path: Path, still_current: Callable[[], bool], *,
                     tail_lines: int | None = None,
                     poll_seconds: float = FOLLOW_POLL_SECONDS) -> AsyncIterator[str]:
    """The log so far, then each new piece, until the writer is gone and all is read.

    A rotation (`LogRotation`) shows as a new rotated file: what the follower had not read
    of the file it held is at the end of that one (then of any later one), and the current
    file starts again from 0. Rotations run on the same event loop, so a follower never
    sees one half done."""
    while not path.exists():
        if not still_current():
            return
        await asyncio.sleep(poll_seconds)
    first = read_log(path, tail_lines=tail_lines) if tail_lines is not None else None
    known = {_rotation_id(p) for p in rotated_logs(path)}
    with open(path, "rb") as f:
        if first is not None:
            f.seek(0, os.SEEK_END)
            if first:
                yield first
        while True:
            done = not _is_written(path) or not still_current()
            new = [p for p in rotated_logs(path) if _rotation_id(p) not in known]
            if new:
                pieces = []
                for i, rotated in enumerate(new):
                    known.add(_rotation_id(rotated))
                    data = _read_rotated(rotated.with_name(_rotation_id(rotated)))
                    pieces.append(data[f.tell():] if i == 0 else data)
                f.seek(0)
                text = b"".join(pieces)
                if text:
                    yield text.decode(errors="replace")
            data = f.read()
            if data:
                yield data.decode(errors="replace")
            elif done:
                return
            else:
                await asyncio.sleep(poll_seconds)


def read_log(path: Path, *, tail_lines: int | None = None) -> str:
    try:
        with open(path, errors="replace") as f:
            if tail_lines is None:
                return f.read()
            return "".join(deque(f, maxlen=max(0, tail_lines)))
    except FileNotFoundError:
        return ""


class LogService:
    """Register with `run_service(handlers=[svc.handler()])`; set `locators` when ready."""

    def __init__(self) -> None:
        self.locators: list[LogLocator] = []

    def locate(self, namespace: str, name: str, container: str | None,
               previous: bool) -> Path:
        return first_located(self.locators, namespace, name, container, previous)

    async def _logs(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            try:
                req = decode_map(request)
            except CodecError as err:
                raise ApiError.bad_request(str(err)) from None
            tail = req.get("tailLines")
            path = self.locate(str(req.get("namespace") or "default"), str(req.get("name")),
                               req.get("container") or None, bool(req.get("previous")))
            return encode({"text": read_log(path, tail_lines=int(tail) if tail is not None
                                            else None)})
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)
            raise AssertionError("unreachable") from None

    async def _follow(self, request: bytes,
                      context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            try:
                req = decode_map(request)
            except CodecError as err:
                raise ApiError.bad_request(str(err)) from None
            tail = req.get("tailLines")
            where = (str(req.get("namespace") or "default"), str(req.get("name")),
                     req.get("container") or None)
            path = self.locate(*where, False)

            def still_current() -> bool:
                try:
                    return self.locate(*where, False) == path
                except ApiError:
                    return False

            async for text in follow_log(path, still_current,
                                         tail_lines=int(tail) if tail is not None else None):
                yield encode({"text": text})
        except ApiError as err:
            code, details, trailer = to_grpc(err)
            await context.abort(code, details, trailing_metadata=trailer)

    def handler(self) -> grpc.GenericRpcHandler:
        return grpc.method_handlers_generic_handler(SERVICE, {
            "Logs": grpc.unary_unary_rpc_method_handler(self._logs),
            "LogsFollow": grpc.unary_stream_rpc_method_handler(self._follow)})


@dataclass(frozen=True)
class RotationTarget:
    """A running container's current log file, and its cgroup (to freeze) if it has one."""

    path: Path
    cgroup: ContainerCgroup | None = None


def _copy_from(source: Path, target: Path, start: int) -> int:
    """Append `source[start:]` to `target`; the new end offset in `source`."""
    with open(source, "rb") as src, open(target, "ab") as dst:
        src.seek(start)
        shutil.copyfileobj(src, dst, 1 << 20)
        return src.tell()


def _compress(path: Path) -> None:
    target = path.with_name(path.name + ".gz")
    tmp = path.with_name(path.name + ".tmp")
    with open(path, "rb") as src, gzip.open(tmp, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    os.replace(tmp, target)
    path.unlink()


def drop_old_attempts(path: Path) -> int:
    """Like Kubernetes' container garbage collection keeping one dead container per
    container: beside attempt `<n>.log` only `<n-1>.log` (what `logs --previous` reads) and
    their rotated files stay; a crash-looping container does not fill the disk."""
    attempt = path.name.removesuffix(".log")
    if not attempt.isdigit():
        return 0
    removed = 0
    for other in path.parent.glob("*.log*"):
        number = other.name.split(".", 1)[0]
        if number.isdigit() and int(number) < int(attempt) - 1:
            other.unlink(missing_ok=True)
            removed += 1
    return removed


class LogRotation:
    """Kubernetes' container log manager for the kubelets of this process."""

    def __init__(self, *, max_size: int, max_files: int, interval: float) -> None:
        self.max_size = max_size
        self.max_files = max_files
        self.interval = interval
        self.listers: list[Callable[[], Iterable[RotationTarget]]] = []

    async def run(self) -> None:
        while True:
            for lister in self.listers:
                for target in list(lister()):
                    try:
                        await asyncio.to_thread(drop_old_attempts, target.path)
                        await self.rotate(target)
                    except OSError as err:
                        log.warning("cannot rotate a container log", extra={
                            "path": str(target.path), "error": err.strerror or str(err)})
            await asyncio.sleep(self.interval)

    async def rotate(self, target: RotationTarget) -> bool:
        """Rotate `target` if it outgrew the maximum size; True if it did."""
        path = target.path
        try:
            if path.stat().st_size < self.max_size:
                return False
        except FileNotFoundError:
            return False
        await asyncio.to_thread(self._clean, path, keep=self.max_files - 2)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        same = [_rotation_key(p.name[len(path.name) + 1:])[1] for p in rotated_logs(path)
                if p.name[len(path.name) + 1:].startswith(stamp)]
        # rotated within this second already: numbered after the last one
        rotated = path.with_name(f"{path.name}.{stamp}" + (f"-{max(same) + 1}" if same else ""))
        partial = rotated.with_name(rotated.name + ".tmp")
        copied = await asyncio.to_thread(_copy_from, path, partial, 0)
        cgroup = target.cgroup
        frozen = await asyncio.to_thread(cgroup.freeze) if cgroup is not None else False
        try:
            # On the event loop, where the kubelet's own writer (a tty container's copy)
            # and the followers also run: nothing is written between the last copy and the
            # truncation but by an unfrozen container, and a follower sees the rotated file
            # only complete, with the current one truncated.
            _copy_from(path, partial, copied)
            os.truncate(path, 0)
            os.rename(partial, rotated)
        finally:
            if frozen and cgroup is not None:
                cgroup.thaw()
        await asyncio.to_thread(self._clean, path, keep=self.max_files - 1)
        return True

    @staticmethod
    def _clean(path: Path, *, keep: int) -> None:
        """Gzip every rotated file but the newest; keep the newest `keep` of them."""
        rotated = rotated_logs(path)
        for old in rotated[:max(0, len(rotated) - keep)]:
            old.unlink(missing_ok=True)
        rotated = rotated_logs(path)
        for older in rotated[:-1]:
            if older.suffix != ".gz":
                _compress(older)


def running_logs(kubelet: Any) -> list[RotationTarget]:
    """The current log files of one kubelet's running containers."""
    cgroups = kubelet.env.cgroups
    targets = []
    for worker in list(kubelet.workers.values()):
        for record in worker.records:
            if record.handle is not None and record.running:
                targets.append(RotationTarget(
                    path=worker.dir.log_path(record.name, record.restart_count),
                    cgroup=cgroups.container(worker.pod, record.name) if cgroups else None))
    return targets
