"""`skiff check history`: run the history workload against the cluster the CLI talks to
(every apiserver it knows) while faults are injected from another shell, and print what the
checker found (skiff.checker.history); exit code 1 on any forbidden anomaly.

`--save FILE` keeps the recorded history as JSON; `--from FILE` checks a saved one again.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Callable
from pathlib import Path

from skiff.checker.history import History, check
from skiff.checker.history.runner import run_workload
from skiff.client.api import parse_targets
from skiff.cluster.kubeconfig import use_kubeconfig_credentials

__all__ = ["add_commands", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "": 1.0}


def parse_duration(text: str) -> float:
    """`30s`, `2m`, `1.5` (seconds) → seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|)\s*", text)
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {text!r} (e.g. 30s, 2m)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def add_commands(add: Callable[..., argparse.ArgumentParser],
                 add_to: Callable[..., argparse.ArgumentParser], *,
                 find_server: Callable[[argparse.Namespace], str],
                 out: Callable[[str], None]) -> None:
    """`skiff check` and its `history` subcommand, on the parser `add` adds to."""
    check_p = add("check", help="check the API's own guarantees under faults (Jepsen's "
                                "method: `check history`)")
    check_sub = check_p.add_subparsers(dest="check_command", required=True)
    hist = add_to(check_sub, "history", help="concurrent CAS updates, consistent and rv=0 "
                                             "reads and resumed watches through every "
                                             "apiserver; report lost writes, stale reads, "
                                             "watch gaps (run `skiff chaos` meanwhile)")
    hist.add_argument("--duration", type=parse_duration, default=30.0,
                      help="how long the workload runs (e.g. 30s, 2m; default 30s)")
    hist.add_argument("--keys", type=_positive, default=5, help="ConfigMaps written")
    hist.add_argument("--workers", type=_positive, default=4, help="concurrent processes")
    hist.add_argument("-n", "--namespace", default="default")
    hist.add_argument("--op-timeout", type=float, default=5.0, metavar="SECONDS",
                      help="one operation's deadline (a write past it is 'unknown')")
    hist.add_argument("--examples", type=int, default=3, help="examples per anomaly kind")
    hist.add_argument("--save", metavar="FILE", help="write the recorded history as JSON")
    hist.add_argument("--from", dest="from_file", metavar="FILE",
                      help="check a saved history instead of running the workload")

    def run(args: argparse.Namespace) -> None:
        if args.from_file:
            history = History.from_json(Path(args.from_file).read_text())
        else:
            server = find_server(args)
            use_kubeconfig_credentials(Path(args.data_dir), server)
            targets = parse_targets(server)
            out(f"running {args.workers} workers on {args.keys} keys for "
                f"{args.duration:g}s through {', '.join(targets)}")
            history = asyncio.run(run_workload(
                targets=targets, duration=args.duration, keys=args.keys,
                workers=args.workers, namespace=args.namespace, timeout=args.op_timeout))
            if args.save:
                Path(args.save).write_text(history.to_json())
        report = check(history)
        out(report.format(examples=args.examples))
        if report.forbidden:
            raise SystemExit(1)

    hist.set_defaults(func=run)
