"""`skiff chaos stale-view`, `skiff chaos miss-events`, `skiff chaos crash-on-write` and
the Perturbation side of `skiff chaos heal` (issue 35): one client identity's stale view,
missed watch events or a crash right after its k-th matching write, as
skiff.io/v1 Perturbation objects the apiserver applies to that identity's cached reads and
watches. The objects are made by `skiff.cluster.chaos.perturb`; this module adds the flags
and turns its argument errors into ones that name the flag."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from skiff.api import ApiError, Reason
from skiff.cli.resources import CliError, Out
from skiff.client import ApiClient
from skiff.cluster.chaos import perturb

# The Python parameter -> the flag a user typed.
_FLAGS = {"user": "--user", "group": "--group", "revision": "--revision",
          "lag_revisions": "--lag-revisions", "lag_seconds": "--lag-seconds",
          "from_write": "--from-write",
          "resources": "--resource", "types": "--type", "names": "--object",
          "coalesce_seconds": "--coalesce-seconds", "after": "--after", "verbs": "--verb",
          "pid": "--pid", "pod": "--pod"}
_HEAL_HINT = "undo with `skiff chaos heal --perturbation {name}` (or `skiff chaos heal`)"


def add_commands(chaos_sub: Any,
                 add_to: Callable[..., argparse.ArgumentParser]) -> None:
    """`stale-view` and `miss-events` under `skiff chaos`."""
    stale = add_to(chaos_sub, "stale-view", help="serve one user's (or group's) cached "
                                                 "reads and watches from the past")
    _subject_flags(stale)
    view = stale.add_mutually_exclusive_group(required=True)
    view.add_argument("--revision", type=int, metavar="R",
                      help="pinned: as of this etcd revision")
    view.add_argument("--lag-revisions", type=int, metavar="N",
                      help="lagging the newest revision by N revisions")
    view.add_argument("--lag-seconds", type=int, metavar="S",
                      help="lagging by S seconds (the newest revision at least S s old)")
    view.add_argument("--from-write", type=int, metavar="K",
                      help="the present until the user's own K-th write, then pinned just "
                           "before it (it no longer sees that write nor any later change)")
    stale.add_argument("--name", help="the Perturbation's name (default: generated)")
    missed = add_to(chaos_sub, "miss-events", help="make one user's (or group's) watches "
                                                   "miss events")
    _subject_flags(missed)
    missed.add_argument("--resource", dest="resources", action="append", default=[],
                        metavar="R", help="pods, or <plural>.<group> (repeat; default all)")
    missed.add_argument("--type", dest="types", action="append", default=[], metavar="T",
                        help="ADDED, MODIFIED or DELETED (repeat; default all)")
    missed.add_argument("--object", dest="names", action="append", default=[],
                        metavar="NAME", help="an object's name or NAMESPACE/NAME (repeat; "
                                             "default all)")
    missed.add_argument("--coalesce-seconds", type=int, default=0, metavar="S",
                        help="instead of dropping, hold matching events S seconds and "
                             "deliver each object's latest state")
    missed.add_argument("--name", help="the Perturbation's name (default: generated)")
    crash = add_to(chaos_sub, "crash-on-write", help="kill a process right after one user's "
                                                     "(or group's) k-th matching write")
    _subject_flags(crash)
    crash.add_argument("--after", type=int, required=True, metavar="K",
                       help="crash after the K-th matching committed write")
    crash.add_argument("--resource", dest="resources", action="append", default=[],
                       metavar="R", help="configmaps, or <plural>.<group> (repeat; default "
                                         "all)")
    crash.add_argument("--verb", dest="verbs", action="append", default=[], metavar="V",
                       help="create, update, patch or delete (repeat; default all)")
    crash.add_argument("--object", dest="names", action="append", default=[],
                       metavar="NAME", help="an object's name or NAMESPACE/NAME (repeat; "
                                            "default all)")
    victim = crash.add_mutually_exclusive_group(required=True)
    victim.add_argument("--pod", metavar="NAMESPACE/NAME[:CONTAINER]",
                        help="the pod's container its kubelet kills (and restarts per the "
                             "pod's restartPolicy)")
    victim.add_argument("--pid", type=int, metavar="PID",
                        help="the process to SIGKILL (on the apiserver's host: a local "
                             "cluster); its supervisor restarts it")
    crash.add_argument("--name", help="the Perturbation's name (default: generated)")


def _subject_flags(parser: argparse.ArgumentParser) -> None:
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--user", help="the user as authentication names it (e.g. "
                                    "system:serviceaccount:NAMESPACE:NAME)")
    who.add_argument("--group", help="every user of this group")


@contextlib.contextmanager
def _flag_errors(name: str | None) -> Iterator[None]:
    """PerturbationError -> a CliError naming the flag; AlreadyExists -> what to do."""
    try:
        yield
    except perturb.PerturbationError as err:
        raise CliError(f"{_FLAGS.get(err.param, err.param)}: {err.problem}") from None
    except ApiError as err:
        if err.reason == Reason.ALREADY_EXISTS:
            raise CliError(f'perturbation "{name}" already exists: pick another --name, or '
                           f"`skiff chaos heal --perturbation {name}` first") from None
        raise


def _subject_text(args: argparse.Namespace) -> str:
    return f"user {args.user}" if args.user is not None else f"group {args.group}"


async def stale_view(api: ApiClient, args: argparse.Namespace, *, out: Out) -> None:
    with _flag_errors(args.name):
        name = await perturb.stale_view(
            api, user=args.user, group=args.group, revision=args.revision,
            lag_revisions=args.lag_revisions, lag_seconds=args.lag_seconds,
            from_write=args.from_write, name=args.name)
    if args.revision is not None:
        view = f"as of revision {args.revision}"
    elif args.from_write is not None:
        view = f"as it was before its own write #{args.from_write} (from that write on)"
    elif args.lag_revisions is not None:
        view = f"{args.lag_revisions} revisions behind"
    else:
        view = f"{args.lag_seconds}s behind"
    out(f"perturbation.skiff.io/{name} created: {_subject_text(args)} reads and watches "
        f"the cluster {view}; {_HEAL_HINT.format(name=name)}")


async def miss_events(api: ApiClient, args: argparse.Namespace, *, out: Out) -> None:
    with _flag_errors(args.name):
        name = await perturb.missed_events(
            api, user=args.user, group=args.group, resources=_split(args.resources),
            types=_split(args.types), names=_split(args.names),
            coalesce_seconds=args.coalesce_seconds, name=args.name)
    types = _split(args.types)
    what = f"{' and '.join(t.upper() for t in types)} events" if types else "events"
    on = " of " + ", ".join(_split(args.resources)) if args.resources else ""
    how = (f" are held {args.coalesce_seconds}s and coalesced"
           if args.coalesce_seconds else " are dropped")
    out(f"perturbation.skiff.io/{name} created: {_subject_text(args)}'s watches: {what}"
        f"{on}{how}; {_HEAL_HINT.format(name=name)}")


async def crash_on_write(api: ApiClient, args: argparse.Namespace, *, out: Out) -> None:
    with _flag_errors(args.name):
        name = await perturb.crash_on_write(
            api, user=args.user, group=args.group, after=args.after,
            resources=_split(args.resources), verbs=_split(args.verbs),
            names=_split(args.names), pid=args.pid, pod=_pod(args.pod), name=args.name)
    verbs = " or ".join(_split(args.verbs)) or "write"
    on = " of " + ", ".join(_split(args.resources)) if args.resources else ""
    victim = f"process {args.pid}" if args.pid is not None else f"pod {args.pod}"
    out(f"perturbation.skiff.io/{name} created: {victim} is killed right after "
        f"{_subject_text(args)}'s {verbs} #{args.after}{on} commits (once; `skiff get "
        f"perturbation {name} -o yaml` shows status.crashes); "
        f"{_HEAL_HINT.format(name=name)}")


def _pod(text: str | None) -> tuple[str, str, str | None] | None:
    """`NAMESPACE/NAME[:CONTAINER]` -> (namespace, name, container)."""
    if text is None:
        return None
    where, _, container = text.partition(":")
    namespace, slash, name = where.partition("/")
    if not slash or not namespace or not name:
        raise CliError(f"--pod: {text!r} is not NAMESPACE/NAME[:CONTAINER]")
    return namespace, name, container or None


def _split(values: list[str]) -> list[str]:
    """Repeated flags and comma lists alike: `--type ADDED,MODIFIED --type DELETED`."""
    return [part.strip() for value in values for part in value.split(",")]


async def heal(api: ApiClient, name: str | None, *, out: Out) -> None:
    """Delete the Perturbation `name`, or every one, saying which."""
    try:
        deleted = await perturb.heal(api, name)
    except ApiError as err:
        if err.reason == Reason.NOT_FOUND and name is not None:
            raise CliError(f'perturbation "{name}" not found; `skiff get perturbations` '
                           "lists them") from None
        raise
    for each in deleted:
        out(f"perturbation.skiff.io/{each} deleted")
    if not deleted:
        out("nothing to heal: no perturbations")


def command(verb: str, out: Out) -> Callable[[ApiClient, argparse.Namespace],
                                              Awaitable[None]] | None:
    """The body of `skiff chaos VERB` when it is a perturbation command, else None."""
    if verb == "stale-view":
        return lambda api, args: stale_view(api, args, out=out)
    if verb == "miss-events":
        return lambda api, args: miss_events(api, args, out=out)
    if verb == "crash-on-write":
        return lambda api, args: crash_on_write(api, args, out=out)
    return None
