"""`skiff describe` and `skiff logs`: one object in detail, and a container's output."""

from __future__ import annotations

from skiff.api import tables as printers
from skiff.api.types import Obj
from skiff.cli.resources import Out, kind_of, namespace_for
from skiff.client import ApiClient, pod_logs


def _kv(mapping: Obj | None, indent: int = 16) -> str:
    if not mapping:
        return "<none>"
    pad = "\n" + " " * indent
    return pad.join(f"{k}={v}" for k, v in sorted(mapping.items()))


def _state(state: Obj) -> list[str]:
    if "running" in state:
        return ["Running", f"  Started:      {state['running'].get('startedAt', '')}"]
    if "terminated" in state:
        t = state["terminated"]
        return ["Terminated", f"  Reason:       {t.get('reason', '')}",
                f"  Exit Code:    {t.get('exitCode', '')}",
                f"  Started:      {t.get('startedAt', '')}",
                f"  Finished:     {t.get('finishedAt', '')}"]
    if "waiting" in state:
        return ["Waiting", f"  Reason:       {state['waiting'].get('reason', '')}"]
    return ["<unknown>"]


async def describe(api: ApiClient, kind: str, name: str, *, namespace: str | None,
                   out: Out) -> None:
    info = kind_of(kind)
    ns = namespace_for(info, namespace)
    obj = await api.get(info.resource, name, ns)
    meta = obj["metadata"]
    lines = [f"Name:         {meta['name']}"]
    if ns:
        lines.append(f"Namespace:    {ns}")
    if info.kind == "Pod":
        spec, status = obj.get("spec", {}), obj.get("status", {})
        lines += [f"Priority:     {spec.get('priority', 0)}",
                  f"Priority Class Name: {spec.get('priorityClassName') or '<none>'}",
                  f"Node:         {spec.get('nodeName') or '<none>'}"]
    lines += [f"Labels:       {_kv(meta.get('labels'))}",
              f"Annotations:  {_kv(meta.get('annotations'))}",
              f"Created:      {meta.get('creationTimestamp', '')}"]
    if meta.get("deletionTimestamp"):
        lines.append(f"Terminating:  since before {meta['deletionTimestamp']} "
                     f"(grace period {meta.get('deletionGracePeriodSeconds')}s)")
    if info.kind == "Pod":
        status = obj.get("status", {})
        lines.append(f"Status:       {printers.pod_status(obj)}")
        if status.get("nominatedNodeName"):
            lines.append(f"Nominated Node: {status['nominatedNodeName']}")
        statuses = {c["name"]: c for c in (status.get("initContainerStatuses") or [])
                    + (status.get("containerStatuses") or [])}
        for title, key in (("Init Containers", "initContainers"),
                           ("Containers", "containers")):
            specs = obj.get("spec", {}).get(key) or []
            if not specs:
                continue
            lines.append(f"{title}:")
            for c in specs:
                cs = statuses.get(c["name"], {})
                lines.append(f"  {c['name']}:")
                argv = " ".join(c.get("command", []) + c.get("args", []))
                lines.append(f"    Command:      {argv}")
                state = _state(cs.get("state", {})) if cs else ["<not started>"]
                lines.append(f"    State:        {state[0]}")
                lines += [f"    {s}" for s in state[1:]]
                if cs.get("lastState"):
                    last = _state(cs["lastState"])
                    lines.append(f"    Last State:   {last[0]}")
                    lines += [f"    {s}" for s in last[1:]]
                lines.append(f"    Ready:        {cs.get('ready', False)}")
                lines.append(f"    Restart Count: {cs.get('restartCount', 0)}")
    conditions = obj.get("status", {}).get("conditions") or []
    if conditions:
        lines.append("Conditions:")
        rows = [[c.get("type", ""), c.get("status", ""), c.get("reason", ""),
                 c.get("message", "")] for c in conditions]
        lines += ["  " + r for r in printers.table(
            rows, ["Type", "Status", "Reason", "Message"]).splitlines()]
    if info.kind == "Node":
        taints = obj.get("spec", {}).get("taints") or []
        lines.append("Taints:       " + ("\n              ".join(
            f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
            for t in taints) or "<none>"))
    events = await api.list("events", ns if info.namespaced else None,
                            field_selector=f"involvedObject.uid={meta.get('uid', '')}")
    lines.append("Events:" + ("" if events["items"] else "       <none>"))
    if events["items"]:
        rows = [[e.get("type", ""), e.get("reason", ""),
                 printers.age(e.get("lastTimestamp")),
                 (e.get("source") or {}).get("component", ""), e.get("message", "")]
                for e in sorted(events["items"], key=lambda e: e.get("lastTimestamp", ""))]
        lines += ["  " + r for r in printers.table(
            rows, ["Type", "Reason", "Age", "From", "Message"]).splitlines()]
    out("\n".join(lines))





async def logs(api: ApiClient, pod_name: str, *, namespace: str | None,
               container: str | None, tail: int | None, previous: bool, out: Out,
               follow: bool = False) -> None:
    """A container's log; with `follow`, new lines as they are written until the container
    exits (or Ctrl-C), as `kubectl logs -f`. `--previous` shows an exited attempt, so it
    is never followed (kubectl prints it and returns, too)."""
    lines = _LineWriter(out)
    try:
        async for piece in pod_logs(api, pod_name, namespace or "default",
                                    container=container, tail_lines=tail, previous=previous,
                                    follow=follow and not previous):
            lines.write(piece)
    finally:
        lines.flush()


class _LineWriter:
    """Prints whole lines as pieces of a log arrive (a piece may end mid-line)."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.pending = ""

    def write(self, piece: str) -> None:
        *complete, self.pending = (self.pending + piece).split("\n")
        for line in complete:
            self.out(line)

    def flush(self) -> None:
        if self.pending:
            self.out(self.pending)
            self.pending = ""
