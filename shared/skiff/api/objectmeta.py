"""`metadata` validation shared by every kind (ValidateObjectMeta and its Update).

Names and generateName, the namespace (required or forbidden by the kind's scope), labels,
annotations (their total size), ownerReferences (one controller at most), finalizers and the
fields that never change once an object exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skiff.api.errors import FieldError, forbidden, invalid, required, too_long
from skiff.api.fieldchecks import (
    MAX_GRACE_SECONDS,
    NameCheck,
    as_dict,
    as_list,
    immutable,
    int_field,
    name_field,
    str_field,
)
from skiff.api.selectors import (
    dns1123_label_problems,
    qualified_name_problems,
    validate_labels,
)
from skiff.api.types import ObjView

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def validate_metadata(obj: ObjView, kind: str, path: str, *, namespaced: bool,
                      name_check: NameCheck, top_level: bool = True) -> list[FieldError]:
    meta, errors = as_dict(obj.get("metadata"), path)
    name, generate_name = meta.get("name"), meta.get("generateName")
    if top_level and not name and not generate_name:
        errors.append(required(f"{path}.name", "name or generateName is required"))
    if name:
        errors += name_field(name, f"{path}.name", name_check)
    if generate_name:
        if isinstance(generate_name, str):
            # A prefix may end in '-'; the random suffix makes it a name.
            errors += [invalid(f"{path}.generateName", generate_name, p)
                       for p in name_check(generate_name.rstrip("-") or "a")]
        else:
            errors.append(invalid(f"{path}.generateName", generate_name, "must be a string"))
    namespace = meta.get("namespace")
    if top_level and namespaced:
        if not namespace:
            errors.append(required(f"{path}.namespace"))
        else:
            errors += name_field(namespace, f"{path}.namespace", dns1123_label_problems)
    elif top_level and namespace:
        errors.append(forbidden(f"{path}.namespace", f"not allowed on this type ({kind} is "
                                                     "cluster-scoped)"))
    errors += validate_labels(meta.get("labels"), f"{path}.labels")
    errors += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    errors += validate_owner_references(meta.get("ownerReferences"),
                                         f"{path}.ownerReferences")
    finalizers, errs = as_list(meta.get("finalizers"), f"{path}.finalizers")
    errors += errs
    for i, finalizer in enumerate(finalizers):
        fpath = f"{path}.finalizers[{i}]"
        if not isinstance(finalizer, str):
            errors.append(invalid(fpath, finalizer, "must be a string"))
        else:
            errors += [invalid(fpath, finalizer, p) for p in qualified_name_problems(finalizer)]
    errors += int_field(meta, "deletionGracePeriodSeconds", f"{path}.deletionGracePeriodSeconds",
                        minimum=0, maximum=MAX_GRACE_SECONDS)
    errors += int_field(meta, "generation", f"{path}.generation", minimum=0)
    return errors


def validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, Mapping):
        return [invalid(path, annotations, "must be a map of string keys to string values")]
    errors: list[FieldError] = []
    total = 0
    for key, value in annotations.items():
        if not isinstance(key, str):
            errors.append(invalid(path, key, "annotation keys must be strings"))
            continue
        errors += [invalid(path, key, p) for p in qualified_name_problems(key.lower())]
        if not isinstance(value, str):
            errors.append(invalid(f"{path}[{key}]", value, "annotation values must be strings"))
            continue
        total += len(key.encode()) + len(value.encode())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errors.append(too_long(path, "", TOTAL_ANNOTATION_SIZE_LIMIT))
    return errors


def validate_owner_references(refs: Any, path: str) -> list[FieldError]:
    items, errors = as_list(refs, path)
    controllers = []
    for i, ref in enumerate(items):
        rpath = f"{path}[{i}]"
        ref_obj, errs = as_dict(ref, rpath)
        errors += errs
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref_obj.get(key):
                errors.append(required(f"{rpath}.{key}", f"{key} must not be empty"))
            else:
                errors += str_field(ref_obj, key, f"{rpath}.{key}")
        if ref_obj.get("controller") is True:
            controllers.append(f"{ref_obj.get('kind')}/{ref_obj.get('name')}")
    if len(controllers) > 1:
        errors.append(invalid(path, refs, "Only one reference can have Controller set to "
                                          f"true. Found \"true\" in references for "
                                          f"{' and '.join(controllers)}"))
    return errors


def validate_metadata_update(obj: ObjView, old: ObjView) -> list[FieldError]:
    meta, _ = as_dict(obj.get("metadata"), "metadata")
    old_meta, _ = as_dict(old.get("metadata"), "metadata")
    errors: list[FieldError] = []
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        errors += immutable(meta.get(key), old_meta.get(key), f"metadata.{key}")
    if old_meta.get("deletionTimestamp"):
        old_finalizers = set(old_meta.get("finalizers") or [])
        added = [f for f in meta.get("finalizers") or [] if f not in old_finalizers]
        if added:
            errors.append(forbidden("metadata.finalizers",
                                    "no new finalizers can be added if the object is being "
                                    f"deleted, found new finalizers {added}"))
    return errors
