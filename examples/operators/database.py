"""Example operator with a stale-read bug: each Database (database.yaml) gets
`spec.replicas` replica ConfigMaps.

Buggy: it counts the replicas it has from a *cached* list (resourceVersion=0, what an
informer's lister answers from) and creates the missing ones with generateName. When that
cache is behind (a stale view), the count never includes what it just made, so every resync
creates more: duplicate replicas.

Fixed (`--fixed`): the replicas have deterministic names (`<db>-0`, `<db>-1`, ...), it
reads them with a consistent list before creating, and an AlreadyExists (409) means "made
already": a stale read can no longer make a second one.

    KUBECONFIG=... python examples/operators/database.py NAMESPACE [--fixed] [--resync 10]
"""

from __future__ import annotations

import argparse
from typing import Any, cast

from kubernetes import client, config, watch
from kubernetes.client import ApiException

GROUP, VERSION, PLURAL = "examples.skiff.io", "v1", "databases"


def list_objects(custom: client.CustomObjectsApi, ns: str, **options: Any) -> dict[str, Any]:
    """The namespace's custom objects (a JSON dict, as the official client returns them)."""
    return cast(dict[str, Any], custom.list_namespaced_custom_object(GROUP, VERSION, ns,
                                                                     PLURAL, **options))


LABEL = "examples.skiff.io/database"


def replica(db: dict[str, Any], *, name: str = "", generate_name: str = "") -> Any:
    meta = db["metadata"]
    owner = client.V1OwnerReference(api_version=f"{GROUP}/{VERSION}", kind="Database",
                                    name=meta["name"], uid=meta["uid"], controller=True)
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name or None, generate_name=generate_name or None,
                                     labels={LABEL: meta["name"]},
                                     owner_references=[owner]),
        data={"role": "replica"})


def reconcile(core: client.CoreV1Api, ns: str, db: dict[str, Any], *, fixed: bool) -> None:
    name, want = db["metadata"]["name"], int(db["spec"]["replicas"])
    selector = f"{LABEL}={name}"
    if not fixed:
        # BUG: a cached list may not hold what this operator created a moment ago
        cached: list[Any] = core.list_namespaced_config_map(
            ns, label_selector=selector, resource_version="0").items
        for _ in range(want - len(cached)):
            made: Any = core.create_namespaced_config_map(
                ns, replica(db, generate_name=f"{name}-"))
            print("created", made.metadata.name, flush=True)
        return
    fresh: list[Any] = core.list_namespaced_config_map(ns, label_selector=selector).items
    have = {cm.metadata.name for cm in fresh}
    for index in range(want):
        child = f"{name}-{index}"
        if child in have:
            continue
        try:
            core.create_namespaced_config_map(ns, replica(db, name=child))
            print("created", child, flush=True)
        except ApiException as err:
            if err.status != 409:  # AlreadyExists: made before, by us
                raise


def run(ns: str, *, fixed: bool, resync: int) -> None:
    config.load_kube_config()
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    while True:  # an informer's loop: list (cached), then watch; each relist is a resync
        listed = list_objects(custom, ns, resource_version="0")
        for db in listed["items"]:
            reconcile(core, ns, db, fixed=fixed)
        try:
            for event in watch.Watch().stream(
                    custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=resync):
                if event["type"] in ("ADDED", "MODIFIED"):
                    reconcile(core, ns, event["object"], fixed=fixed)
        except ApiException as err:
            if err.status != 410:  # Gone: relist
                raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("namespace")
    parser.add_argument("--fixed", action="store_true", help="run the fixed version")
    parser.add_argument("--resync", type=int, default=10, help="seconds between relists")
    args = parser.parse_args()
    run(args.namespace, fixed=args.fixed, resync=args.resync)


if __name__ == "__main__":
    main()
