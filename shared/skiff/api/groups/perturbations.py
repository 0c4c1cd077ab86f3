"""Skiff's own skiff.io/v1 Perturbations (controller testing): what the apiserver does to
one client identity's view of the cluster — a stale view, missed watch events, a crash
on write, or only a record of its requests (`record: true`) — as declared objects, so
every perturbation is in etcd's event log. Validation, kubectl's columns and known
fields."""

from __future__ import annotations

from skiff.api.columns import age_column, meta
from skiff.api.errors import FieldError, duplicate, forbidden, invalid, not_supported, required
from skiff.api.fieldchecks import as_dict, as_list, immutable, int_field
from skiff.api.fieldschema import OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.types import Obj, ObjView

SUBJECT_KINDS = ("user", "group")
STALE_VIEW_KINDS = ("revision", "lagRevisions", "lagSeconds", "fromWrite")
EVENT_TYPES = ["ADDED", "MODIFIED", "DELETED"]
WRITE_VERBS = ["create", "update", "patch", "delete"]
TARGET_KINDS = ("pod", "pid")
SPEC_KINDS = "`staleView`, `missedEvents`, `crashOnWrite`, `record`"


def _one_of(block: ObjView, keys: tuple[str, ...], path: str) -> tuple[str | None,
                                                                          list[FieldError]]:
    """The one key of `keys` set in `block` (or None), and the error when not exactly one."""
    present = [k for k in keys if block.get(k) is not None]
    choices = ", ".join(f"`{k}`" for k in keys)
    if not present:
        return None, [required(path, f"must specify one of: {choices}")]
    if len(present) > 1:
        return None, [forbidden(f"{path}.{present[1]}",
                                f"may not specify more than one of: {choices}")]
    return present[0], []


def _subject_errors(spec: ObjView) -> list[FieldError]:
    subject, errors = as_dict(spec.get("subject"), "spec.subject")
    if errors:
        return errors
    key, errors = _one_of(subject, SUBJECT_KINDS, "spec.subject")
    if key is None:
        return errors
    value, path = subject[key], f"spec.subject.{key}"
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    return [required(path)] if not value.strip() else []


def _stale_view_errors(spec: ObjView) -> list[FieldError]:
    stale, errors = as_dict(spec.get("staleView"), "spec.staleView")
    if errors:
        return errors
    key, errors = _one_of(stale, STALE_VIEW_KINDS, "spec.staleView")
    if key is None:
        return errors
    return int_field(stale, key, f"spec.staleView.{key}", minimum=1,
                     detail="must be greater than 0")


def _names_errors(block: ObjView, key: str, path: str) -> list[FieldError]:
    """A list of non-empty strings, each once."""
    items, errors = as_list(block.get(key), path)
    seen: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, str):
            errors.append(invalid(f"{path}[{i}]", item, "must be a string"))
        elif not item.strip():
            errors.append(required(f"{path}[{i}]"))
        elif item in seen:
            errors.append(duplicate(f"{path}[{i}]", item))
        else:
            seen.add(item)
    return errors


def _missed_events_errors(spec: ObjView) -> list[FieldError]:
    missed, errors = as_dict(spec.get("missedEvents"), "spec.missedEvents")
    if errors:
        return errors
    path = "spec.missedEvents"
    errors += _names_errors(missed, "resources", f"{path}.resources")
    errors += _names_errors(missed, "names", f"{path}.names")
    types, errs = as_list(missed.get("types"), f"{path}.types")
    errors += errs
    seen: set[str] = set()
    for i, value in enumerate(types):
        if value not in EVENT_TYPES:
            errors.append(not_supported(f"{path}.types[{i}]", value, EVENT_TYPES))
        elif value in seen:
            errors.append(duplicate(f"{path}.types[{i}]", value))
        else:
            seen.add(value)
    errors += int_field(missed, "coalesceSeconds", f"{path}.coalesceSeconds", minimum=0)
    return errors


def _target_errors(crash: ObjView, path: str) -> list[FieldError]:
    target, errors = as_dict(crash.get("target"), path)
    if errors:
        return errors
    key, errors = _one_of(target, TARGET_KINDS, path)
    if key is None:
        return errors
    if key == "pid":
        return int_field(target, "pid", f"{path}.pid", minimum=2,
                         detail="must be greater than 1")
    pod, errors = as_dict(target.get("pod"), f"{path}.pod")
    for field in ("namespace", "name"):
        if not isinstance(pod.get(field), str) or not str(pod[field]).strip():
            errors.append(required(f"{path}.pod.{field}"))
    container = pod.get("container")
    if container is not None and not isinstance(container, str):
        errors.append(invalid(f"{path}.pod.container", container, "must be a string"))
    return errors


def _crash_on_write_errors(spec: ObjView) -> list[FieldError]:
    crash, errors = as_dict(spec.get("crashOnWrite"), "spec.crashOnWrite")
    if errors:
        return errors
    path = "spec.crashOnWrite"
    if crash.get("after") is None:
        errors.append(required(f"{path}.after"))
    errors += int_field(crash, "after", f"{path}.after", minimum=1,
                        detail="must be greater than 0")
    errors += _names_errors(crash, "resources", f"{path}.resources")
    errors += _names_errors(crash, "names", f"{path}.names")
    verbs, errs = as_list(crash.get("verbs"), f"{path}.verbs")
    errors += errs
    seen: set[str] = set()
    for i, value in enumerate(verbs):
        if value not in WRITE_VERBS:
            errors.append(not_supported(f"{path}.verbs[{i}]", value, WRITE_VERBS))
        elif value in seen:
            errors.append(duplicate(f"{path}.verbs[{i}]", value))
        else:
            seen.add(value)
    if crash.get("target") is None:
        errors.append(required(f"{path}.target", "must specify one of: `pod`, `pid`"))
    else:
        errors += _target_errors(crash, f"{path}.target")
    return errors


def _validate_perturbation(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    if errors:
        return errors
    if spec.get("subject") is None:
        errors.append(required("spec.subject", "must specify one of: `user`, `group`"))
    else:
        errors += _subject_errors(spec)
    record = spec.get("record")
    if record is not None and not isinstance(record, bool):
        errors.append(invalid("spec.record", record, "must be a boolean"))
    if all(spec.get(k) is None for k in ("staleView", "missedEvents", "crashOnWrite")) \
            and record is not True:  # `record: false` alone asks nothing
        errors.append(required("spec", f"must specify at least one of: {SPEC_KINDS}"))
    if spec.get("staleView") is not None:
        errors += _stale_view_errors(spec)
    if spec.get("missedEvents") is not None:
        errors += _missed_events_errors(spec)
    if spec.get("crashOnWrite") is not None:
        errors += _crash_on_write_errors(spec)
    status, errs = as_dict(obj.get("status"), "status")
    errors += errs + int_field(status, "observedRevision", "status.observedRevision",
                               minimum=0)
    errors += int_field(status, "pinnedRevision", "status.pinnedRevision", minimum=0)
    if old is not None:
        old_subject = (old.get("spec") or {}).get("subject")
        errors += immutable(spec.get("subject"), old_subject, "spec.subject")
    return errors


def subject_column(o: Obj) -> str:
    """SUBJECT: `user=NAME` or `group=NAME`."""
    subject = (o.get("spec") or {}).get("subject") or {}
    return next((f"{k}={subject[k]}" for k in SUBJECT_KINDS if subject.get(k)), "<none>")


def stale_view_column(o: Obj) -> str:
    """STALE VIEW: `@1234` (pinned), `-20 rev` or `-5s` (lagging), `from write #K`;
    `<none>` without one."""
    stale = (o.get("spec") or {}).get("staleView") or {}
    if stale.get("revision") is not None:
        return f"@{stale['revision']}"
    if stale.get("lagRevisions") is not None:
        return f"-{stale['lagRevisions']} rev"
    if stale.get("lagSeconds") is not None:
        return f"-{stale['lagSeconds']}s"
    if stale.get("fromWrite") is not None:
        return f"from write #{stale['fromWrite']}"
    return "<none>"


def missed_events_column(o: Obj) -> str:
    """MISSED EVENTS: `MODIFIED pods`, `ALL pods/web-0`, `ADDED,DELETED ALL (held 5s)`;
    `<none>` without them."""
    missed = (o.get("spec") or {}).get("missedEvents")
    if missed is None:
        return "<none>"
    types = ",".join(str(t) for t in missed.get("types") or []) or "ALL"
    text = f"{types} {','.join(str(r) for r in missed.get('resources') or []) or 'ALL'}"
    if missed.get("names"):
        text += "/" + ",".join(str(n) for n in missed["names"])
    if missed.get("coalesceSeconds"):
        text += f" (held {missed['coalesceSeconds']}s)"
    return text


RULES = GroupRules(
    validators={"Perturbation": _validate_perturbation},
    columns={"Perturbation": [
        ("NAME", meta("name")), ("SUBJECT", subject_column),
        ("STALE VIEW", stale_view_column), ("MISSED EVENTS", missed_events_column),
        ("AGE", age_column)]},
    schemas={"Perturbation": fields(
        *TOP, "status", metadata=OBJECT_META,
        spec=fields("record", subject=fields("user", "group"),
                    staleView=fields("revision", "lagRevisions", "lagSeconds",
                                     "fromWrite"),
                    missedEvents=fields("resources", "types", "names",
                                        "coalesceSeconds"),
                    crashOnWrite=fields("after", "resources", "verbs", "names",
                                        target=fields("pid", pod=fields(
                                            "namespace", "name", "container")))))},
)
