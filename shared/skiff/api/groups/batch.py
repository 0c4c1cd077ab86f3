"""The batch/v1 group: Jobs and CronJobs — defaults (the generated selector and labels, the
completion and backoff defaults), validation (a CronJob's job template with a Job's rules, its
schedule and time zone), kubectl's columns and known fields. The cron arithmetic is
`skiff.api.cronschedule`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from skiff.api.columns import (
    age,
    age_column,
    label_selector_text,
    meta,
    spec_of,
    status_of,
    template_containers,
)
from skiff.api.cronschedule import (
    CONCURRENCY_POLICIES,
    MAX_NAME_LENGTH,
    ScheduleError,
    expression,
    zone,
)
from skiff.api.errors import FieldError, invalid, not_supported, required
from skiff.api.fieldchecks import as_dict, enum_field, immutable, int_field
from skiff.api.fielddefaults import ensure_child, set_if_none, template_spec
from skiff.api.fieldschema import CONDITIONS, LABEL_SELECTOR, OBJECT_META, TOP, fields
from skiff.api.grouprules import GroupRules
from skiff.api.groups.core.podspec import validate_pod_spec
from skiff.api.groups.core.podtemplate import POD_TEMPLATE, default_pod_spec
from skiff.api.selectors import LabelSelector, validate_label_selector
from skiff.api.types import Obj, ObjView
from skiff.api.wellknown import JOB_CONTROLLER_UID_LABEL, JOB_NAME_LABEL
from skiff.clock import parse_rfc3339

# -- defaults ----------------------------------------------------------------------------


def _default_job(obj: Obj) -> None:
    spec = ensure_child(obj, "spec")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    set_if_none(spec, "parallelism", 1)
    # With a per-index limit the Job-wide one is unbounded unless set (as Kubernetes).
    set_if_none(spec, "backoffLimit",
                2147483647 if spec.get("backoffLimitPerIndex") is not None else 6)
    set_if_none(spec, "completionMode", "NonIndexed")
    set_if_none(spec, "suspend", False)
    set_if_none(spec, "podReplacementPolicy",
                 "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    set_if_none(spec, "manualSelector", None)
    if spec.get("manualSelector") is None:
        spec.pop("manualSelector", None)
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        if isinstance(rule, dict):
            for pattern in rule.get("onPodConditions") or []:
                if isinstance(pattern, dict):
                    set_if_none(pattern, "status", "True")
    # The selector Kubernetes generates (batch/v1 `generateSelector`): the job's uid.
    uid = obj.get("metadata", {}).get("uid")
    name = obj.get("metadata", {}).get("name")
    template = ensure_child(spec, "template")
    labels = ensure_child(ensure_child(template, "metadata"), "labels")
    if uid and not spec.get("manualSelector"):
        labels.setdefault(JOB_CONTROLLER_UID_LABEL, uid)
        labels.setdefault("controller-uid", uid)
        if name:
            labels.setdefault(JOB_NAME_LABEL, name)
            labels.setdefault("job-name", name)
        if spec.get("selector") is None:
            spec["selector"] = {"matchLabels": {JOB_CONTROLLER_UID_LABEL: uid}}
    tspec = template_spec(obj)
    restart = tspec.get("restartPolicy")
    default_pod_spec(tspec)
    if restart is None:
        tspec.pop("restartPolicy", None)  # a Job's template must choose: validation says so


def _default_cron_job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)


# -- validation --------------------------------------------------------------------------


def validate_job_spec(obj: ObjView) -> list[FieldError]:
    """A Job's spec rules, for a CronJob's jobTemplate too."""
    return _validate_job(obj, None)


def _validate_job(obj: ObjView, old: ObjView | None) -> list[FieldError]:
    spec, errors = as_dict(obj.get("spec"), "spec")
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        errors += int_field(spec, key, f"spec.{key}", minimum=0)
    errors += int_field(spec, "activeDeadlineSeconds", "spec.activeDeadlineSeconds",
                        minimum=1)
    errors += enum_field(spec, "completionMode", "spec.completionMode",
                         ["NonIndexed", "Indexed"])
    if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
        errors.append(required("spec.completions"))
    selector = spec.get("selector")
    if selector is None:
        errors.append(required("spec.selector"))
    else:
        errors += validate_label_selector(selector, "spec.selector")
    template, errs = as_dict(spec.get("template"), "spec.template")
    errors += errs
    labels = (template.get("metadata") or {}).get("labels") or {}
    if isinstance(selector, dict) and not validate_label_selector(selector, "spec.selector"):
        parsed = LabelSelector.from_dict(selector, path="spec.selector")
        if not parsed.matches(labels if isinstance(labels, dict) else {}):
            errors.append(invalid("spec.template.metadata.labels", labels,
                                  "`selector` does not match template `labels`"))
    errors += validate_pod_spec(template.get("spec"), "spec.template.spec")
    tspec, _ = as_dict(template.get("spec"), "spec.template.spec")
    restart = tspec.get("restartPolicy")
    if restart not in ("Never", "OnFailure"):
        errors.append(required("spec.template.spec.restartPolicy") if restart is None else
                      not_supported("spec.template.spec.restartPolicy", restart,
                                    ["OnFailure", "Never"]))
    policy, errs = as_dict(spec.get("podFailurePolicy"), "spec.podFailurePolicy")
    errors += errs
    if policy and restart != "Never":
        errors.append(invalid("spec.template.spec.restartPolicy", restart,
                              "only \"Never\" is supported when podFailurePolicy is specified"))
    for i, rule in enumerate(policy.get("rules") or []):
        rpath = f"spec.podFailurePolicy.rules[{i}]"
        rule_obj, errs = as_dict(rule, rpath)
        errors += errs
        errors += enum_field(rule_obj, "action", f"{rpath}.action",
                             ["Count", "FailIndex", "FailJob", "Ignore"],
                             is_required=True)
        if bool(rule_obj.get("onExitCodes")) == bool(rule_obj.get("onPodConditions")):
            errors.append(invalid(rpath, "", "specifying one of onExitCodes and "
                                             "onPodConditions is required"))
    if old is not None:
        old_spec = old.get("spec") or {}
        for key in ("selector", "completions", "completionMode", "podFailurePolicy"):
            if key == "completions" and spec.get("completions") != old_spec.get(
                    "completions") and spec.get("completionMode") == "Indexed" and \
                    spec.get("completions") == spec.get("parallelism"):
                continue  # elastic Indexed jobs may scale completions with parallelism
            errors += immutable(spec.get(key), old_spec.get(key), f"spec.{key}")
        errors += immutable(spec.get("template"), old_spec.get("template"),
                                        "spec.template")
    return errors


def _validate_cron_job(obj: Mapping[str, Any],
                       old: Mapping[str, Any] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    name = str((obj.get("metadata") or {}).get("name") or "")
    if len(name) > MAX_NAME_LENGTH:
        errors.append(invalid("metadata.name", name,
                              f"must be no more than {MAX_NAME_LENGTH} characters"))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [*errors, required("spec")]
    schedule = spec.get("schedule")
    if not schedule:
        errors.append(required("spec.schedule"))
    elif not isinstance(schedule, str):
        errors.append(invalid("spec.schedule", schedule, "must be a string"))
    else:
        try:
            expression(schedule)
        except ScheduleError as err:
            errors.append(invalid("spec.schedule", schedule, str(err)))
    if spec.get("timeZone") is not None:
        try:
            zone(str(spec["timeZone"]))
        except ScheduleError as err:
            errors.append(invalid("spec.timeZone", spec["timeZone"], str(err)))
    policy = spec.get("concurrencyPolicy")
    if policy is not None and policy not in CONCURRENCY_POLICIES:
        errors.append(not_supported("spec.concurrencyPolicy", policy, CONCURRENCY_POLICIES))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit",
                "failedJobsHistoryLimit"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or value < 0):
            errors.append(invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    template = spec.get("jobTemplate")
    if not isinstance(template, dict):
        return [*errors, required("spec.jobTemplate")]
    job_spec = dict(template.get("spec") or {})
    given_selector = "selector" in job_spec
    job_spec.setdefault("selector", {})
    for error in validate_job_spec({"spec": job_spec}):
        if not given_selector and error.path.startswith(("spec.selector",
                                                         "spec.template.metadata.labels")):
            continue  # the apiserver gives the Job its selector when it is created
        errors.append(dataclasses.replace(
            error, path="spec.jobTemplate." + error.path))
    return errors


# -- columns -----------------------------------------------------------------------------


def job_status_word(job: Obj) -> str:
    """kubectl 1.32's Job STATUS column."""
    conditions = {c.get("type"): c.get("status") for c in status_of(job).get("conditions") or []}
    for cond in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet", "Suspended"):
        if conditions.get(cond) == "True":
            return {"FailureTarget": "FailureTarget",
                    "SuccessCriteriaMet": "SuccessCriteriaMet"}.get(cond, cond)
    if job.get("metadata", {}).get("deletionTimestamp"):
        return "Terminating"
    return "Running"


def _job_duration(job: Obj) -> str:
    status = status_of(job)
    start = status.get("startTime")
    if not start:
        return ""
    end = status.get("completionTime")
    return age(start, now=parse_rfc3339(end) if end else None)


def _last_schedule(cj: Obj) -> str:
    last = (cj.get("status") or {}).get("lastScheduleTime")
    return age(last) if last else "<none>"


_JOB_SPEC = fields(
    "parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
    "backoffLimitPerIndex", "maxFailedIndexes", "manualSelector", "ttlSecondsAfterFinished",
    "completionMode", "suspend", "podReplacementPolicy", "managedBy", "successPolicy",
    "podFailurePolicy", selector=LABEL_SELECTOR, template=POD_TEMPLATE)

RULES = GroupRules(
    defaulters={"Job": _default_job, "CronJob": _default_cron_job},
    validators={"Job": _validate_job, "CronJob": _validate_cron_job},
    columns={
        "Job": [
            ("NAME", meta("name")), ("STATUS", job_status_word),
            ("COMPLETIONS", lambda o: f"{status_of(o).get('succeeded', 0)}/"
                                      f"{spec_of(o).get('completions', 1)}"
             if spec_of(o).get("completions") is not None
             else f"{status_of(o).get('succeeded', 0)}/1 of {spec_of(o).get('parallelism', 1)}"),
            ("DURATION", _job_duration), ("AGE", age_column)],
        # kubectl's CronJob printer
        "CronJob": [
            ("NAME", meta("name")), ("SCHEDULE", lambda o: str(spec_of(o).get("schedule", ""))),
            ("TIMEZONE", lambda o: str(spec_of(o).get("timeZone") or "<none>")),
            ("SUSPEND", lambda o: "True" if spec_of(o).get("suspend") else "False"),
            ("ACTIVE", lambda o: str(len((o.get("status") or {}).get("active") or []))),
            ("LAST SCHEDULE", _last_schedule),
            ("AGE", lambda o: age(o["metadata"].get("creationTimestamp")))],
    },
    wide={
        "Job": [("CONTAINERS", lambda o: template_containers(o, "name")),
                ("IMAGES", lambda o: template_containers(o, "image")),
                ("SELECTOR", lambda o: label_selector_text(spec_of(o).get("selector")))],
    },
    schemas={
        "Job": fields(
            *TOP, metadata=OBJECT_META, spec=_JOB_SPEC,
            status=fields("startTime", "completionTime", "active", "succeeded", "failed",
                                 "terminating", "completedIndexes", "failedIndexes",
                                 "uncountedTerminatedPods", "ready", conditions=CONDITIONS),
        ),
        "CronJob": fields(
            *TOP, metadata=OBJECT_META,
            spec=fields(
                "schedule", "timeZone", "startingDeadlineSeconds", "concurrencyPolicy", "suspend",
                "successfulJobsHistoryLimit", "failedJobsHistoryLimit",
                jobTemplate=fields(metadata=OBJECT_META, spec=_JOB_SPEC)),
            status=fields("active", "lastScheduleTime", "lastSuccessfulTime")),
    },
    initial_status={"Job": {}, "CronJob": {}},
)
