"""Example operator with a missed-event bug: each Claim (claim.yaml) holds a lock
ConfigMap `claim-<name>` on `spec.resource` while it exists.

Buggy: it frees the lock only when the Claim's DELETED event arrives. A watch can miss that
event (a dropped connection across the delete, an expired watch, a missed-events fault), and
then the lock leaks forever: nothing else ever looks at it again.

Fixed (`--fixed`): on every resync it also compares the full state, the locks against the
Claims that exist (by name and uid), and frees each lock whose Claim is gone: it is
level-triggered, so a missed event only delays the release until the next resync.

    KUBECONFIG=... python examples/operators/claim.py NAMESPACE [--fixed] [--resync 10]
"""

from __future__ import annotations

import argparse
from typing import Any, cast

from kubernetes import client, config, watch
from kubernetes.client import ApiException

GROUP, VERSION, PLURAL = "examples.skiff.io", "v1", "claims"


def list_objects(custom: client.CustomObjectsApi, ns: str, **options: Any) -> dict[str, Any]:
    """The namespace's custom objects (a JSON dict, as the official client returns them)."""
    return cast(dict[str, Any], custom.list_namespaced_custom_object(GROUP, VERSION, ns,
                                                                     PLURAL, **options))


LABEL = "examples.skiff.io/claim"


def acquire(core: client.CoreV1Api, ns: str, claim: dict[str, Any]) -> None:
    meta = claim["metadata"]
    lock = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=f"claim-{meta['name']}",
                                     labels={LABEL: meta["name"]}),
        data={"resource": claim["spec"]["resource"], "holderUID": meta["uid"]})
    try:
        core.create_namespaced_config_map(ns, lock)
        print("acquired", meta["name"], flush=True)
    except ApiException as err:
        if err.status != 409:  # held already
            raise


def release(core: client.CoreV1Api, ns: str, name: str) -> None:
    try:
        core.delete_namespaced_config_map(f"claim-{name}", ns)
        print("released", name, flush=True)
    except ApiException as err:
        if err.status != 404:
            raise


def sweep(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str) -> None:
    """The fix: free every lock whose Claim (that name, that uid) no longer exists."""
    claims = list_objects(custom, ns)["items"]
    live = {(c["metadata"]["name"], c["metadata"]["uid"]) for c in claims}
    locks: list[Any] = core.list_namespaced_config_map(ns, label_selector=LABEL).items
    for lock in locks:
        owner = (lock.metadata.labels[LABEL], (lock.data or {}).get("holderUID"))
        if owner not in live:
            release(core, ns, owner[0])


def run(ns: str, *, fixed: bool, resync: int) -> None:
    config.load_kube_config()
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    while True:  # an informer's loop: list (cached), then watch; each relist is a resync
        listed = list_objects(custom, ns, resource_version="0")
        for claim in listed["items"]:
            acquire(core, ns, claim)
        if fixed:
            sweep(core, custom, ns)
        try:
            for event in watch.Watch().stream(
                    custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=resync):
                claim = event["object"]
                if event["type"] == "DELETED":
                    release(core, ns, claim["metadata"]["name"])  # BUG (alone): edge only
                elif event["type"] in ("ADDED", "MODIFIED"):
                    acquire(core, ns, claim)
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
