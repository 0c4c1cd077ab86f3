"""`python -m skiff.checker.heartbeat --log FILE [--volume DIR] [--interval 0.1]`.

The workload of the at-most-one scenarios: identity from `POD_NAME` (set through
`valueFrom.fieldRef: metadata.name`), UID from `POD_UID` (`metadata.uid`). Every interval it
appends one JSON line `{"identity", "uid", "pid", "mono", "wall"}` to FILE and to
`<volume>/heartbeats`, flushed and fsynced, so a line on disk means the process was alive at
`mono`. `time.monotonic()` is the kernel's CLOCK_MONOTONIC, shared by every process on the
host, so lines from different pods compare. Exits 0 on SIGTERM (a clean stop).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import IO

__all__ = ["main"]


def _append(handle: IO[str], line: str) -> None:
    handle.write(line)
    handle.flush()
    os.fsync(handle.fileno())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m skiff.checker.heartbeat",
                                     description="append at-most-one heartbeats")
    parser.add_argument("--log", required=True, help="the log the checker reads")
    parser.add_argument("--volume", help="the pod's volume directory (also gets heartbeats)")
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between beats")
    args = parser.parse_args(argv)
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    uid = os.environ.get("POD_UID", "")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    Path(args.log).parent.mkdir(parents=True, exist_ok=True)
    handles: list[IO[str]] = [open(args.log, "a")]  # noqa: SIM115 - closed below
    if args.volume:
        Path(args.volume).mkdir(parents=True, exist_ok=True)
        handles.append(open(Path(args.volume) / "heartbeats", "a"))  # noqa: SIM115
    try:
        while not stop.is_set():
            line = json.dumps({"identity": identity, "uid": uid, "pid": os.getpid(),
                               "mono": time.monotonic(), "wall": time.time()}) + "\n"
            for handle in handles:
                _append(handle, line)
            stop.wait(args.interval)
    finally:
        for handle in handles:
            handle.close()


if __name__ == "__main__":
    main()
