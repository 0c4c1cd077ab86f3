"""The `skiff` command: start a local cluster, work with objects, inject faults.

Every failure is one line that says what went wrong and what to do, with a non-zero exit
code; no stack traces. The apiserver is found from `--server`, then `SKIFF_SERVER`, then
the cluster last started by `skiff up` in the data dir (`SKIFF_DATA_DIR`, `~/.skiff`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import os
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from skiff.api import ApiError
from skiff.api import tables as printers
from skiff.cli import chaos, checkhistory, describe, explore, fencing, join, resources, token
from skiff.client import ApiClient
from skiff.cluster.chaos.docker import ChaosError
from skiff.cluster.chaos.members import MEMBER_COMMANDS, MemberError
from skiff.cluster.chaos.partitions import partitions_for
from skiff.cluster.config import ClusterConfig, ConfigError
from skiff.cluster.kubeconfig import use_kubeconfig_credentials
from skiff.cluster.processes import StartError
from skiff.cluster.provider import down, new_cluster
from skiff.cluster.state import ClusterState, default_data_dir, running_elsewhere
from skiff.cluster.status import STATUS_COLUMNS, status_rows
from skiff.cluster.supervisor import Backoff, Supervisor, clear_stopped, spawn_detached


def _out(text: str) -> None:
    print(text, flush=True)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fail(message: str, code: int = 1) -> NoReturn:
    _err(message if message.startswith(("error", "Error", "warning")) else f"error: {message}")
    raise SystemExit(code)


def find_server(args: argparse.Namespace) -> str:
    if args.server:
        return str(args.server)
    if os.environ.get("SKIFF_SERVER"):
        return os.environ["SKIFF_SERVER"]
    state = ClusterState.load(Path(args.data_dir))
    if state is not None:
        return state.api
    fail("no cluster to talk to: start one with `skiff up`, or pass --server HOST:PORT "
         "(or set SKIFF_SERVER)")


def with_client(args: argparse.Namespace,
                body: Callable[[ApiClient], Awaitable[None]]) -> None:
    server = find_server(args)
    use_kubeconfig_credentials(Path(args.data_dir), server)

    async def run() -> None:
        async with ApiClient(server, retry_seconds=args.request_timeout,
                             timeout=args.request_timeout) as api:
            await body(api)

    asyncio.run(run())


# -- cluster commands --------------------------------------------------------------------


def cmd_up(args: argparse.Namespace) -> None:
    data_dir = Path(args.data_dir)
    config = ClusterConfig.load(Path(args.config)) if args.config else ClusterConfig()
    if args.nodes < 0:
        fail("--nodes must be 0 or more")
    if args.restart_backoff <= 0 or args.restart_backoff_max < args.restart_backoff:
        fail("--restart-backoff must be > 0 and --restart-backoff-max at least as long")
    cluster = new_cluster(data_dir, nodes=args.nodes, config=config, ha=args.ha,
                          netns=args.netns, insecure=args.insecure,
                          apiserver_processes=args.apiserver_processes,
                          advertise_address=args.advertise_address)
    stop = {"flag": False}

    def on_signal(*_: Any) -> None:
        stop["flag"] = True

    # Ctrl-C and SIGTERM only set a flag, so wherever they land the cluster is stopped below.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if running_elsewhere(data_dir) is None:
        clear_stopped(data_dir)  # a new cluster starts with nothing held down
    state = cluster.start(echo=_out)
    use_kubeconfig_credentials(data_dir)  # for the readiness wait below
    try:
        if args.nodes and any(c.name.startswith("kubelet-") for c in state.components):
            asyncio.run(_wait_nodes_ready(state.api, args.nodes, args.ready_timeout))
        if not args.insecure:  # SPEC JN3: what joining nodes discover
            token.publish_cluster_info(state.api, data_dir=data_dir, warn=_err)
    except BaseException:
        cluster.stop()
        raise
    if stop["flag"]:
        _out(cluster.stop())
        fail("interrupted while starting; everything that had started was stopped")
    _out(f"\nSkiff is up. API: {state.api}   data: {data_dir}")
    backoff = Backoff(args.restart_backoff, args.restart_backoff_max)
    # What dies comes back (cluster/supervisor.py): a supervisor process when detached, else
    # this one, recorded so that `skiff down` stops it first.
    if args.detach:
        state.supervisor_pid = spawn_detached(data_dir, backoff)
        state.save(data_dir)
        _out(f"Stop it with `{_down_command(data_dir)}`.")
        return
    _out("Press Ctrl-C to stop.")
    state.supervisor_pid = os.getpid()
    state.save(data_dir)
    Supervisor(data_dir, backoff, echo=_err,
               children=list(cluster.processes)).run(lambda: stop["flag"])
    _out("\nstopping...")
    _out(cluster.stop())
    _out("stopped.")


def _down_command(data_dir: Path) -> str:
    """`skiff down`, with `--data-dir` when the cluster is not in the default data dir."""
    if data_dir.resolve() == default_data_dir().resolve():
        return "skiff down"
    return f"skiff down --data-dir {shlex.quote(str(data_dir))}"


async def _wait_nodes_ready(target: str, count: int, timeout: float) -> None:
    async with ApiClient(target) as api:
        deadline = time.monotonic() + timeout
        while True:
            nodes = (await api.list("nodes"))["items"]
            ready = [n for n in nodes if printers.node_status(n).startswith("Ready")]
            if len(ready) >= count:
                return
            if time.monotonic() > deadline:
                raise StartError(f"only {len(ready)}/{count} nodes became Ready within "
                                 f"{timeout:.0f}s; see the kubelet logs")
            await asyncio.sleep(0.2)


def cmd_down(args: argparse.Namespace) -> None:
    for line in down(Path(args.data_dir)):
        _out(line)


def cmd_status(args: argparse.Namespace) -> None:
    use_kubeconfig_credentials(Path(args.data_dir))
    state = running_elsewhere(Path(args.data_dir))
    if state is None:
        fail(f"no running cluster in {args.data_dir}; start one with `skiff up`")
    _out(printers.table(status_rows(state), STATUS_COLUMNS))


# -- resource commands -------------------------------------------------------------------


def cmd_apply(args: argparse.Namespace) -> None:
    docs = resources.load_documents(args.filename, sys.stdin.read)
    with_client(args, lambda api: resources.apply(api, docs, namespace=args.namespace,
                                                  out=_out))


def cmd_get(args: argparse.Namespace) -> None:
    with_client(args, lambda api: resources.get(
        api, args.kind, args.name, namespace=args.namespace,
        all_namespaces=args.all_namespaces, output=args.output, watch=args.watch,
        at_revision=args.at_revision, selector=args.selector, labels=args.label_columns,
        out=_out))


def cmd_describe(args: argparse.Namespace) -> None:
    with_client(args, lambda api: describe.describe(api, args.kind, args.name,
                                                     namespace=args.namespace, out=_out))


def cmd_delete(args: argparse.Namespace) -> None:
    with_client(args, lambda api: resources.delete(
        api, args.kind, args.names, namespace=args.namespace, grace_period=args.grace_period,
        force=args.force, wait=args.wait, out=_out, err=_err))


def cmd_history(args: argparse.Namespace) -> None:
    with_client(args, lambda api: resources.history(api, args.kind, args.name,
                                                    namespace=args.namespace, out=_out))


def cmd_label(args: argparse.Namespace) -> None:
    with_client(args, lambda api: resources.label(
        api, args.kind, args.name, args.labels, namespace=args.namespace,
        overwrite=args.overwrite, out=_out))


def cmd_logs(args: argparse.Namespace) -> None:
    if args.follow:
        # Ctrl-C ends a follow at once, as kubectl's does: with a Python-level handler, not
        # asyncio's cancel-and-wait, which full test runs saw hang for 30 s and more while a
        # cancelled gRPC stream wound down.
        signal.signal(signal.SIGINT, lambda *_: _exit_now(130))
    with_client(args, lambda api: describe.logs(
        api, args.pod, namespace=args.namespace, container=args.container, tail=args.tail,
        previous=args.previous, follow=args.follow, out=_out))


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown user"


def cmd_fence(args: argparse.Namespace) -> None:
    with_client(args, lambda api: fencing.fence(
        api, args.node, agent=args.agent, reason=args.reason,
        requested_by=f"skiff-cli ({_user()})", out=_out))


def cmd_unfence(args: argparse.Namespace) -> None:
    with_client(args, lambda api: fencing.unfence(api, args.node, timeout=args.timeout,
                                                  out=_out))


def cmd_chaos(args: argparse.Namespace) -> None:
    use_kubeconfig_credentials(Path(args.data_dir))
    if args.chaos_command in MEMBER_COMMANDS:
        try:
            _out(MEMBER_COMMANDS[args.chaos_command](Path(args.data_dir), args.member))
        except MemberError as err:
            fail(str(err))
        return
    if (body := chaos.command(args.chaos_command, _out)) is not None:
        with_client(args, lambda api: body(api, args))
        return
    if args.chaos_command == "heal" and args.perturbation:
        if args.node:
            fail("give a NODE (to heal its partitions) or --perturbation NAME, not both")
        with_client(args, lambda api: chaos.heal(api, args.perturbation, out=_out))
        return
    heal_all = args.chaos_command == "heal" and args.node is None
    local = running_elsewhere(Path(args.data_dir))
    problem = None
    if not (heal_all and local and not local.netns):  # no partitions without --netns
        partitions = partitions_for(Path(args.data_dir), project=args.project)
        try:
            if args.chaos_command == "partition":
                lines = partitions.partition(args.node, args.from_component)
            else:
                lines = partitions.heal(args.node)
            for line in lines:
                _out(line)
        except ChaosError as err:
            problem = str(err)
    if heal_all and (args.server or os.environ.get("SKIFF_SERVER") or local):
        with_client(args, lambda api: chaos.heal(api, None, out=_out))  # every Perturbation
    if problem:
        fail(problem)


# -- parser ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="skiff", description="A small, real Kubernetes control plane you can break on "
                                  "purpose.")
    parser.add_argument("--server", help="apiserver HOST:PORT (default: $SKIFF_SERVER, then "
                                         "the cluster started by `skiff up`)")
    parser.add_argument("--data-dir", default=str(default_data_dir()),
                        help="where `skiff up` keeps its state (default: $SKIFF_DATA_DIR or "
                             "~/.skiff)")
    parser.add_argument("--request-timeout", type=float, default=15.0,
                        help="seconds to wait for the apiserver")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def ns_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("-n", "--namespace", help="namespace (default: default)")

    def data_dir_arg(p: argparse.ArgumentParser) -> None:
        # Also accepted after any subcommand (`skiff get pods --data-dir DIR`), as users
        # write it; the top-level value stands when it is not given there.
        p.add_argument("--data-dir", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.add_argument("--server", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        p.add_argument("--request-timeout", type=float, default=argparse.SUPPRESS,
                       help=argparse.SUPPRESS)

    def add_to(subs: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = subs.add_parser(name, **kwargs)
        data_dir_arg(p)
        p.set_defaults(usage_parser=p)  # its errors print its own usage, not skiff's
        return p

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return add_to(sub, name, **kwargs)

    up = add("up", help="start a local cluster (etcd + every service)")
    up.add_argument("--nodes", type=int, default=3, help="kubelets to start (node-1..N)")
    up.add_argument("--detach", action="store_true", help="return once ready; leave it "
                                                          "running")
    up.add_argument("--config", help="YAML with apiserver/scheduler/controllerManager/"
                                     "kubelet sections (Kubernetes setting names)")
    up.add_argument("--ready-timeout", type=float, default=60.0)
    up.add_argument("--ha", action="store_true",
                    help="a replicated control plane: 3 etcd members, 2 apiservers, "
                         "2 schedulers, 2 controller-managers")
    up.add_argument("--restart-backoff", type=float, default=10.0, metavar="SECONDS",
                    help="wait before restarting a component that died again (doubles "
                         "each time; the first restart is at once)")
    up.add_argument("--restart-backoff-max", type=float, default=300.0, metavar="SECONDS")
    up.add_argument("--insecure", action="store_true",
                    help="no TLS, no authentication, no authorization (quick experiments "
                         "only; warned on every start)")
    up.add_argument("--netns", action="store_true",
                    help="each component on its own network namespace (root only), so "
                         "`skiff chaos` cuts are real network partitions")
    up.add_argument("--apiserver-processes", type=int, default=1, metavar="N",
                    help="N apiserver processes sharing the API ports (SO_REUSEPORT), each "
                         "with its own watch cache, to use more cores")
    up.add_argument("--advertise-address", default="", metavar="IP",
                    help="an address of this machine that other machines reach the API at "
                         "(kubeadm init's --apiserver-advertise-address): the apiservers "
                         "listen on every address on ports 6443 (gRPC) and 8080 (HTTPS), "
                         "and their certificate, the kubeconfig and `skiff token create "
                         "--print-join-command` name it (also the apiserver section's "
                         "advertiseAddress in --config)")
    up.set_defaults(func=cmd_up)
    down = add("down", help="stop a detached cluster, every process by PID")
    down.set_defaults(func=cmd_down)
    status = add("status", help="every component with PID, address and health")
    status.set_defaults(func=cmd_status)

    apply_p = add("apply", help="create or update objects from YAML")
    apply_p.add_argument("-f", "--filename", required=True, help="file, or - for stdin")
    ns_args(apply_p)
    apply_p.set_defaults(func=cmd_apply)

    get_p = add("get", help="list or show objects")
    get_p.add_argument("kind")
    get_p.add_argument("name", nargs="?")
    ns_args(get_p)
    get_p.add_argument("-A", "--all-namespaces", action="store_true")
    get_p.add_argument("-o", "--output", default="", choices=["", "wide", "yaml", "json",
                                                               "name"])
    get_p.add_argument("-w", "--watch", action="store_true")
    get_p.add_argument("-l", "--selector", default="", help="label selector")
    get_p.add_argument("-L", "--label-columns", action="append", default=[], metavar="KEY",
                       help="a column with each object's value of this label (e.g. "
                            "-L topology.kubernetes.io/zone); comma lists and repeats work")
    get_p.add_argument("--at-revision", type=int, default=0,
                       help="read as of this etcd revision (time travel)")
    get_p.set_defaults(func=cmd_get)

    describe_p = add("describe", help="an object with conditions, states, events")
    describe_p.add_argument("kind")
    describe_p.add_argument("name")
    ns_args(describe_p)
    describe_p.set_defaults(func=cmd_describe)

    delete_p = add("delete", help="delete objects (gracefully by default)")
    delete_p.add_argument("kind")
    delete_p.add_argument("names", nargs="+", metavar="NAME")
    ns_args(delete_p)
    delete_p.add_argument("--grace-period", type=int, default=None)
    delete_p.add_argument("--force", "--confirm", dest="force", action="store_true",
                          help="with --grace-period=0: remove the object at once (force)")
    delete_p.add_argument("--wait", action="store_true",
                          help="wait until the object is gone")
    delete_p.set_defaults(func=cmd_delete)

    history_p = add("history", help="every version of an object in etcd's log")
    history_p.add_argument("kind")
    history_p.add_argument("name")
    ns_args(history_p)
    history_p.set_defaults(func=cmd_history)

    label_p = add("label", help="set (key=value) or remove (key-) labels")
    label_p.add_argument("kind")
    label_p.add_argument("name")
    label_p.add_argument("labels", nargs="+")
    ns_args(label_p)
    label_p.add_argument("--overwrite", action="store_true")
    label_p.set_defaults(func=cmd_label)

    logs_p = add("logs", help="a pod container's output")
    logs_p.add_argument("pod")
    ns_args(logs_p)
    logs_p.add_argument("-c", "--container")
    logs_p.add_argument("--tail", type=int)
    logs_p.add_argument("-p", "--previous", action="store_true")
    logs_p.add_argument("-f", "--follow", action="store_true",
                        help="stream new lines until the container exits (or Ctrl-C)")
    logs_p.set_defaults(func=cmd_logs)

    fence_p = add("fence", help="fence a node: stop it (power), cut it off "
                                           "(network) or revoke its volumes (storage)")
    fence_p.add_argument("node")
    fence_p.add_argument("--agent", choices=list(fencing.FENCE_AGENTS),
                         help="default: the node's skiff.io/fence-agent annotation")
    fence_p.add_argument("--reason", help="why (recorded in the Fence)")
    fence_p.set_defaults(func=cmd_fence)
    unfence_p = add("unfence", help="give a fenced node back (deletes its Fence "
                                               "and waits until it is gone)")
    unfence_p.add_argument("node")
    unfence_p.add_argument("--timeout", type=float, default=60.0)
    unfence_p.set_defaults(func=cmd_unfence)

    chaos_p = add("chaos", help="inject faults: partitions (compose or `skiff up --netns` "
                                "cluster), member crashes, one client's stale view")
    chaos_sub = chaos_p.add_subparsers(dest="chaos_command", required=True)
    part = add_to(chaos_sub, "partition", help="cut a node off (docker network, or "
                                                  "nftables in a --netns cluster)")
    part.add_argument("node")
    part.add_argument("--from", dest="from_component",
                      help="cut it only from this component (e.g. apiserver)")
    part.add_argument("--project", default="skiff", help="compose project name")
    heal = add_to(chaos_sub, "heal", help="undo partitions (of one node, or all) and "
                                          "perturbations (all, or --perturbation NAME)")
    heal.add_argument("node", nargs="?")
    heal.add_argument("--project", default="skiff")
    heal.add_argument("--perturbation", metavar="NAME",
                      help="delete only this Perturbation (without a node, `heal` deletes "
                           "them all)")
    chaos.add_commands(chaos_sub, add_to)
    for verb, text in (("kill", "SIGKILL a member; the supervisor starts it again"),
                       ("stop", "stop a member; it stays down until `chaos start`"),
                       ("start", "start a member `chaos stop` stopped")):
        member_p = add_to(chaos_sub, verb, help=text)
        member_p.add_argument("member", help="a NAME from `skiff status` (etcd-1, "
                                             "apiserver-2, scheduler-1, node-1, ...)")
    chaos_p.set_defaults(func=cmd_chaos)
    checkhistory.add_commands(add, add_to, find_server=find_server, out=_out)
    explore.add_commands(add, add_to, out=_out)
    token.add_commands(add, add_to, with_client=with_client, find_server=find_server, out=_out)
    join.add_commands(add, out=_out)
    return parser


def _exit_now(code: int) -> None:
    """Flush and leave without the interpreter's shutdown, where gRPC's threads may still be
    winding down a cancelled stream (seen to hold `logs -f` for 30 s and more)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Report it with the usage of the subcommand it was given to, as kubectl does.
        words = list(sys.argv[1:] if argv is None else argv)
        command_at = words.index(args.command) if args.command in words else len(words)
        before = any(word in unknown for word in words[:command_at])
        usage: argparse.ArgumentParser = parser if before else getattr(
            args, "usage_parser", parser)
        usage.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        args.func(args)
    except ApiError as err:
        fail(f"Error from server ({err.reason}): {err.message}")
    except resources.CliError as err:
        fail(str(err))
    except (StartError, ConfigError) as err:
        fail(str(err))
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:
        raise SystemExit(0) from None
    except OSError as err:
        fail(f"{err.strerror or err}: {getattr(err, 'filename', '') or ''}".rstrip(": "))


if __name__ == "__main__":
    main()
