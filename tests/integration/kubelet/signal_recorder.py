"""A container process for termination tests: it records, with timestamps, the signals it
receives and when it died.

`python signal_recorder.py FILE [--exit-on-term [--linger S]] [--exit-code N] [--hold-mib M]`
appends `pid <pid>` and `start <t>` (with --hold-mib, once it holds M MiB of written, so
resident, memory: pressure for the eviction tests that starts when the recorder is ready),
then `SIGTERM <t>` (or any catchable stop signal) as they arrive
(with --linger it takes S seconds to exit after one; with --exit-on-term it appends
`exiting <t>` just before it exits: nothing outside can see the exit earlier). SIGKILL
cannot be caught, so its death is recorded from outside the container: the test process
watches the recorded pid (`kubelet/conftest.py`, a pidfd) and appends `dead <t>`. A witness
inside the container cannot do it: when a container stops, every process of it dies, as on
Kubernetes (the kubelet kills its cgroup).
"""

from __future__ import annotations

import os
import signal
import sys
import time


def record(path: str, line: str) -> None:
    with open(path, "a") as f:
        f.write(f"{line} {time.time()}\n")
        f.flush()


def main() -> None:
    path = sys.argv[1]
    exit_on_term = "--exit-on-term" in sys.argv
    exit_code = int(sys.argv[sys.argv.index("--exit-code") + 1]) if "--exit-code" in sys.argv \
        else 0
    linger = float(sys.argv[sys.argv.index("--linger") + 1]) if "--linger" in sys.argv else 0.0
    hold_mib = int(sys.argv[sys.argv.index("--hold-mib") + 1]) if "--hold-mib" in sys.argv \
        else 0

    def on_signal(signum: int, _frame: object) -> None:
        record(path, signal.Signals(signum).name)
        if exit_on_term:
            time.sleep(linger)
            record(path, "exiting")
            sys.exit(exit_code)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGQUIT):
        signal.signal(sig, on_signal)
    held = b"x" * (hold_mib << 20)  # every page written: resident, counted by the kubelet
    with open(path, "a") as f:
        f.write(f"pid {os.getpid()}\n")
    record(path, "start")
    print("recorder started", flush=True)
    assert len(held) == hold_mib << 20
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
