"""Every API group's rules in one place: the tables the dispatchers read.

`skiff.api.validation`, `defaults`, `tables` and `schema` look a kind up here; each group
module of `skiff.api.groups` contributes its `RULES` and nothing else writes these tables.
A kind claimed by two groups is a programming error, refused at import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from skiff.api.columns import Column
from skiff.api.fieldschema import Fields
from skiff.api.grouprules import Defaulter, GroupRules, Validator
from skiff.api.groups import (
    admissionregistration,
    apiextensions,
    apiregistration,
    apps,
    autoscaling,
    batch,
    certificates,
    coordination,
    discovery,
    events,
    fencing,
    networking,
    perturbations,
    policy,
    rbac,
    scheduling,
    storage,
)
from skiff.api.groups.core import (
    cluster,
    config,
    limitranges,
    pods,
    replicationcontrollers,
    resourcequotas,
    services,
    volumes,
)

K = TypeVar("K")
V = TypeVar("V")

GROUPS: tuple[GroupRules, ...] = (
    pods.RULES, cluster.RULES, services.RULES, config.RULES, volumes.RULES,
    replicationcontrollers.RULES, limitranges.RULES, resourcequotas.RULES,
    apps.RULES, batch.RULES, autoscaling.RULES, networking.RULES, rbac.RULES, policy.RULES,
    events.RULES, storage.RULES, coordination.RULES, discovery.RULES, scheduling.RULES,
    fencing.RULES, apiextensions.RULES, admissionregistration.RULES,
    apiregistration.RULES, perturbations.RULES, certificates.RULES,
)


def _merge(tables: Iterable[Mapping[K, V]]) -> dict[K, V]:
    merged: dict[K, V] = {}
    for table in tables:
        for key, value in table.items():
            if key in merged:
                raise ValueError(f"{key} has rules in two API groups")
            merged[key] = value
    return merged


DEFAULTERS: dict[str, Defaulter] = _merge(g.defaulters for g in GROUPS)
VALIDATORS: dict[str, Validator] = _merge(g.validators for g in GROUPS)
COLUMNS: dict[str, list[Column]] = _merge(g.columns for g in GROUPS)
WIDE: dict[str, list[Column]] = _merge(g.wide for g in GROUPS)
SCHEMAS: dict[str, Fields] = _merge(g.schemas for g in GROUPS)
VERSION_SCHEMAS: dict[tuple[str, str], Fields] = _merge(g.version_schemas for g in GROUPS)
INITIAL_STATUS: dict[str, Mapping[str, Any]] = _merge(g.initial_status for g in GROUPS)
