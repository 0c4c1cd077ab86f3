"""Example operator with an intermediate-state bug: each Backup (backup.yaml) gets one
job, a child ConfigMap, recorded in the Backup's `status.job`.

Buggy: when `status.job` is empty it creates a child with generateName and then writes the
child's name into the status. A crash between the two writes (the process killed, the node
gone, the status write failing) leaves a child nobody recorded; on restart the status is
still empty, so it creates a second one: two jobs for one Backup.

Fixed (`--fixed`): before creating, it adopts a child it made earlier (found by label, with
a consistent read), and a new child has a deterministic name (`<backup>-job`), so a second
create is an AlreadyExists (409) that it adopts too.

    KUBECONFIG=... python examples/operators/backup.py NAMESPACE [--fixed] [--resync 10]
"""

from __future__ import annotations

import argparse
from typing import Any, cast

from kubernetes import client, config, watch
from kubernetes.client import ApiException

GROUP, VERSION, PLURAL = "examples.skiff.io", "v1", "backups"


def list_objects(custom: client.CustomObjectsApi, ns: str, **options: Any) -> dict[str, Any]:
    """The namespace's custom objects (a JSON dict, as the official client returns them)."""
    return cast(dict[str, Any], custom.list_namespaced_custom_object(GROUP, VERSION, ns,
                                                                     PLURAL, **options))


LABEL = "examples.skiff.io/backup"


def child(backup: dict[str, Any], *, name: str = "", generate_name: str = "") -> Any:
    meta = backup["metadata"]
    owner = client.V1OwnerReference(api_version=f"{GROUP}/{VERSION}", kind="Backup",
                                    name=meta["name"], uid=meta["uid"], controller=True)
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name or None, generate_name=generate_name or None,
                                     labels={LABEL: meta["name"]},
                                     owner_references=[owner]),
        data={"target": backup["spec"]["target"]})


def create_child(core: client.CoreV1Api, ns: str, backup: dict[str, Any], *,
                 fixed: bool) -> str:
    name = backup["metadata"]["name"]
    if not fixed:
        # BUG: nothing ties this child to the Backup until the status write below lands
        made: Any = core.create_namespaced_config_map(
            ns, child(backup, generate_name=f"{name}-job-"))
        return str(made.metadata.name)
    mine: list[Any] = core.list_namespaced_config_map(ns, label_selector=f"{LABEL}={name}").items
    if mine:
        return str(mine[0].metadata.name)  # adopt what an earlier run made
    try:
        core.create_namespaced_config_map(ns, child(backup, name=f"{name}-job"))
    except ApiException as err:
        if err.status != 409:
            raise
    return f"{name}-job"


def reconcile(core: client.CoreV1Api, custom: client.CustomObjectsApi, ns: str,
              backup: dict[str, Any], *, fixed: bool) -> None:
    if (backup.get("status") or {}).get("job") or backup["metadata"].get("deletionTimestamp"):
        return
    job = create_child(core, ns, backup, fixed=fixed)
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, backup["metadata"]["name"], {"status": {"job": job}})
    print("recorded", job, flush=True)


def run(ns: str, *, fixed: bool, resync: int) -> None:
    config.load_kube_config()
    core, custom = client.CoreV1Api(), client.CustomObjectsApi()
    while True:  # an informer's loop: list, then watch; each relist is a resync
        listed = list_objects(custom, ns)
        for backup in listed["items"]:
            reconcile(core, custom, ns, backup, fixed=fixed)
        try:
            for event in watch.Watch().stream(
                    custom.list_namespaced_custom_object, GROUP, VERSION, ns, PLURAL,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=resync):
                if event["type"] in ("ADDED", "MODIFIED"):
                    reconcile(core, custom, ns, event["object"], fixed=fixed)
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
