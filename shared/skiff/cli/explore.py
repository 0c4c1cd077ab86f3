"""`skiff explore run` and `skiff explore replay` (issue 35): test an unmodified controller
under stale views, missed events and crashes that a plan derived from its own reference
run puts where its decisions are; exit code 1 when a test run diverged (a finding), 0
when none did. The controller is given as a command explore starts (`--controller`) or as
the identity of one the workload's setup deploys (`--identity`, `--controller-pods`). The
work is skiff.explore's; this module adds the flags and turns argument problems into
errors that name the flag."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from skiff.api import ApiError
from skiff.api.selectors import LabelSelector
from skiff.cli.resources import CliError
from skiff.explore.cluster import ExploreError
from skiff.explore.driver import Options
from skiff.explore.plan import KINDS
from skiff.explore.report import finding_lines, render, write_reports
from skiff.explore.session import explore, replay
from skiff.explore.steps import StepError
from skiff.explore.workload import Workload, WorkloadError, load_workload

__all__ = ["add_commands", "controller_form"]

T = TypeVar("T")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") \
            from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text!r}")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return int(text)


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    for kind in kinds:
        if kind not in KINDS:
            raise argparse.ArgumentTypeError(f"{kind!r} is not one of {', '.join(KINDS)}")
    if not kinds:
        raise argparse.ArgumentTypeError(f"give one or more of {', '.join(KINDS)}")
    return kinds


def add_commands(add: Callable[..., argparse.ArgumentParser],
                 add_to: Callable[..., argparse.ArgumentParser], *,
                 out: Callable[[str], None]) -> None:
    explore_p = add("explore", help="test a controller under stale views, missed events and "
                                    "crashes placed by a plan from its own reference run")
    sub = explore_p.add_subparsers(dest="explore_command", required=True)
    run = add_to(sub, "run", help="reference runs, a test plan, one fresh cluster per test, "
                                  "a report of the findings")
    run.add_argument("workload", help="the workload file (YAML: namespace, setup, steps, "
                                      "compare, invariants)")
    run.add_argument("--controller", metavar="COMMAND",
                     help="how to start the controller ({namespace} and {kubeconfig} are "
                          "filled in; $KUBECONFIG is set to its own identity's)")
    run.add_argument("--identity", metavar="USER",
                     help="instead of --controller: a controller the workload's setup "
                          "deploys in each cluster, by its identity as RBAC names it "
                          "(system:serviceaccount:NS:NAME); its pod needs --nodes 1 or more")
    run.add_argument("--controller-pods", metavar="SELECTOR",
                     help="with --identity: a label selector naming the controller's pods in "
                          "the workload's namespace (crash tests kill the first Running one; "
                          "without it there are no crash tests)")
    run.add_argument("--user", default=None,
                     help="with --controller: its identity (its client certificate's user; "
                          "default skiff-explore:controller)")
    run.add_argument("--group", dest="groups", action="append", default=None,
                     help="its groups (repeat; default system:masters)")
    run.add_argument("--nodes", type=int, default=0, help="kubelets in each cluster (0)")
    run.add_argument("--cluster-config", help="`skiff up --config` for each cluster (e.g. "
                                              "to turn off a built-in controller)")
    run.add_argument("--out", help="where runs and reports go (default "
                                   "./skiff-explore/<time>)")
    run.add_argument("--parallel", type=_count, default=1,
                     help="test runs (clusters) at once")
    run.add_argument("--max-tests", type=_count, default=20)
    run.add_argument("--kinds", type=_kinds, default=list(KINDS),
                     help=f"comma list of {', '.join(KINDS)} (default: all)")
    run.add_argument("--reference-runs", type=_count, default=2,
                     help="fault-free runs; fields that differ between them are ignored")
    run.add_argument("--hold", type=_seconds, default=2.0,
                     help="seconds the fault stays after the last step")
    run.add_argument("--quiet", type=_seconds, default=3.0,
                     help="settled: the controller has not written for this long")
    run.add_argument("--settle-timeout", type=_seconds, default=30.0)
    run.add_argument("--fault-wait", type=_seconds, default=10.0,
                     help="under a fault, a wait step gives up after this and the run goes "
                          "on (the end state decides)")
    run.add_argument("--ready-timeout", type=_seconds, default=30.0,
                     help="seconds for the controller's first request")

    def do_run(args: argparse.Namespace) -> None:
        if args.nodes < 0:
            raise CliError("--nodes must be 0 or more")
        kinds, note = controller_form(controller=args.controller, identity=args.identity,
                                      controller_pods=args.controller_pods, user=args.user,
                                      groups=args.groups, nodes=args.nodes, kinds=args.kinds)
        workload = _load(Path(args.workload))
        config = Path(args.cluster_config) if args.cluster_config else None
        if config is not None and not config.is_file():
            raise CliError(f"--cluster-config: no such file: {config}")
        opts = Options(
            workload=workload, controller=args.controller or "",
            # with --identity the subject is the identity (no certificate of its own is used)
            user=args.identity or args.user or "skiff-explore:controller",
            identity=args.identity or "", controller_pods=args.controller_pods or "",
            groups=() if args.identity else tuple(args.groups or ("system:masters",)),
            nodes=args.nodes,
            cluster_config=config,
            out=Path(args.out or f"skiff-explore/{time.strftime('%Y%m%d-%H%M%S')}"),
            ready_timeout=args.ready_timeout, hold=args.hold, quiet=args.quiet,
            settle_timeout=args.settle_timeout, fault_wait=args.fault_wait)
        if note:
            out(note)
        outcome = _guarded(lambda: explore(
            opts, parallel=args.parallel, max_tests=args.max_tests, kinds=kinds,
            reference_runs=args.reference_runs, echo=out))
        out("")
        out(render(outcome))
        md, js = write_reports(outcome)
        out(f"\nreport: {md} (and {js.name}); runs and logs: {opts.out / 'runs'}")
        if outcome.findings:
            raise SystemExit(1)

    run.set_defaults(func=do_run)
    again = add_to(sub, "replay", help="run one saved test again (the command each "
                                       "finding's report gives)")
    again.add_argument("test", help="a tests/<id>.json file of an explore run")

    def do_replay(args: argparse.Namespace) -> None:
        result = _guarded(lambda: replay(Path(args.test), echo=out))
        if result.diverged:
            out("\n".join(["FINDING (again):", *finding_lines(result)]))
            raise SystemExit(1)
        out(f"no divergence this time ({result.seconds:.1f}s): the fault did not change "
            "the end state")

    again.set_defaults(func=do_replay)


def controller_form(*, controller: str | None, identity: str | None,
                    controller_pods: str | None, user: str | None,
                    groups: list[str] | None = None, nodes: int,
                    kinds: list[str]) -> tuple[list[str], str]:
    """Check how the controller is given (exactly one of --controller and --identity, and
    the flags that go with each); the test kinds to plan and a line to print (why crash
    tests are left out), or ""."""
    if controller is not None and identity is not None:
        raise CliError("give either --controller (explore starts it) or --identity (the "
                       "workload's setup deploys it), not both")
    if controller is None and identity is None:
        raise CliError("the controller is missing: give --controller COMMAND (explore "
                       "starts it) or --identity USER (the workload's setup deploys it)")
    if controller is not None:
        if not controller.strip():
            raise CliError("--controller: the command is empty")
        if controller_pods is not None:
            raise CliError("--controller-pods goes with --identity (a controller started "
                           "by --controller is a process, not pods)")
        return kinds, ""
    assert identity is not None
    if not identity.strip():
        raise CliError("--identity: give the controller's user as RBAC names it, e.g. "
                       "system:serviceaccount:NAMESPACE:NAME")
    if user is not None or groups:
        raise CliError(f"{'--user' if user is not None else '--group'} goes with "
                       "--controller: with --identity the controller's user is the identity "
                       "(its groups are the cluster's to give)")
    if nodes < 1:
        raise CliError("--identity needs --nodes 1 or more: the controller runs in a pod")
    if controller_pods is not None:
        try:
            LabelSelector.parse(controller_pods)
        except ApiError as err:
            raise CliError(f"--controller-pods: {err}") from None
        if not controller_pods.strip():
            raise CliError("--controller-pods: the selector is empty")
        return kinds, ""
    if "crash" not in kinds:
        return kinds, ""
    left = [k for k in kinds if k != "crash"]
    if not left:
        raise CliError("--kinds crash with --identity needs --controller-pods SELECTOR "
                       "(the pods a crash test kills)")
    return left, ("no crash tests: without --controller-pods explore does not know which "
                  "pod is the controller")


def _load(path: Path) -> Workload:
    try:
        return load_workload(path)
    except WorkloadError as err:
        raise CliError(f"{path}: {err}") from None
    except OSError as err:
        raise CliError(f"cannot read the workload {path}: {err.strerror}") from None


def _guarded(run: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run `run()`; explore's own problems become errors that say what to do."""
    try:
        return asyncio.run(run())
    except (ExploreError, StepError, WorkloadError, ValueError) as err:
        raise CliError(str(err)) from None
