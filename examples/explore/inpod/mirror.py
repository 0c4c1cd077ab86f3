"""A tiny operator that runs in a pod with nothing but the node's python3 standard library
(SPEC CT2, `skiff explore --identity`): for each ConfigMap labelled `mirror=yes` in its own
namespace it keeps a copy `<name>-mirror` (labelled `mirror-of=<name>`) with the same data,
and deletes the copy when the source goes or loses the label.

In-cluster, as any Kubernetes pod: its ServiceAccount's token, CA and namespace from
/var/run/secrets/kubernetes.io/serviceaccount, the apiserver at
https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT. A list, then a watch from the
list's resourceVersion; it lists again when the watch ends, errors or says 410 Gone. Every
event reconciles the source it concerns from the cache the list and watch keep; a write
that meets a Conflict or AlreadyExists reads the object (a consistent GET) and tries again.
Shipped to the pod in a ConfigMap (operator.yaml embeds this file as it is; not named
operator.py, which would shadow the standard library's `operator` module)."""

import json
import os
import ssl
import time
import urllib.error
import urllib.request
from typing import Any

Obj = dict[str, Any]

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
SOURCE_LABEL, MIRROR_LABEL = "mirror", "mirror-of"


def read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


HOST = os.environ["KUBERNETES_SERVICE_HOST"]
BASE = f"https://{f'[{HOST}]' if ':' in HOST else HOST}:{os.environ['KUBERNETES_SERVICE_PORT']}"
NS = read(SA + "/namespace")
CONTEXT = ssl.create_default_context(cafile=SA + "/ca.crt")
PATH = f"/api/v1/namespaces/{NS}/configmaps"


def log(*words: object) -> None:
    print(time.strftime("%H:%M:%S"), *words, flush=True)


def open_url(method: str, path: str, body: Obj | None = None, timeout: float = 30.0) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method, headers={
        "Authorization": "Bearer " + read(SA + "/token"),
        "Accept": "application/json", "Content-Type": "application/json"})
    return urllib.request.urlopen(req, context=CONTEXT, timeout=timeout)


def call(method: str, path: str, body: Obj | None = None) -> tuple[int, Obj]:
    """(HTTP status, the decoded body) of one request."""
    try:
        with open_url(method, path, body) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as err:
        try:
            return err.code, json.load(err)
        except ValueError:
            return err.code, {}


def labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def wanted(source: Obj, mirror_name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": mirror_name, "namespace": NS,
                         "labels": {MIRROR_LABEL: source["metadata"]["name"]}},
            "data": dict(source.get("data") or {})}


def ensure_mirror(source: Obj, cached: Obj | None) -> Obj:
    """The mirror as written (or as found, when it already matched)."""
    name = source["metadata"]["name"] + "-mirror"
    want = wanted(source, name)
    current = cached
    for _ in range(5):
        if current is None:
            status, got = call("POST", PATH, want)
            if status == 201:
                log("created", name)
                return got
            if status != 409:
                raise RuntimeError(f"create {name}: HTTP {status} {got}")
        elif (current.get("data") or {}) == want["data"] \
                and labels(current).get(MIRROR_LABEL) == labels(want)[MIRROR_LABEL]:
            return current
        else:
            body = dict(want, metadata=dict(want["metadata"],
                        resourceVersion=current["metadata"]["resourceVersion"]))
            status, got = call("PUT", PATH + "/" + name, body)
            if status == 200:
                log("updated", name, json.dumps(want["data"], sort_keys=True))
                return got
            if status not in (404, 409):
                raise RuntimeError(f"update {name}: HTTP {status} {got}")
        status, got = call("GET", PATH + "/" + name)  # the truth, not the cache
        current = got if status == 200 else None
    raise RuntimeError(f"{name}: still conflicting after 5 tries")


def reconcile(cache: dict[str, Obj], name: str) -> None:
    """Make `name`'s mirror (or, for a mirror, its source's) what the cache says."""
    obj = cache.get(name)
    source_name = name
    if obj is not None and MIRROR_LABEL in labels(obj):
        source_name = labels(obj)[MIRROR_LABEL]
    elif obj is None and name.endswith("-mirror"):
        source_name = name[:-len("-mirror")]  # a mirror gone: made again if still wanted
    source = cache.get(source_name)
    mirror_name = source_name + "-mirror"
    mirror = cache.get(mirror_name)
    if mirror is not None and MIRROR_LABEL not in labels(mirror):
        return  # a ConfigMap that only looks like a mirror: not ours
    if source is not None and labels(source).get(SOURCE_LABEL) == "yes":
        cache[mirror_name] = ensure_mirror(source, mirror)
    elif mirror is not None:
        status, got = call("DELETE", PATH + "/" + mirror_name)
        if status not in (200, 202, 404):
            raise RuntimeError(f"delete {mirror_name}: HTTP {status} {got}")
        cache.pop(mirror_name, None)
        log("deleted", mirror_name)


def watch(cache: dict[str, Obj], version: str) -> None:
    """Follow the watch from `version` until it ends (timeout, error, 410 Gone)."""
    query = "?watch=1&allowWatchBookmarks=true&timeoutSeconds=60&resourceVersion=" + version
    with open_url("GET", PATH + query, timeout=90.0) as stream:
        for line in stream:
            if not line.strip():
                continue
            event = json.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                log("watch ended:", obj.get("code"), obj.get("message"))
                return
            if kind == "BOOKMARK":
                continue
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                cache.pop(name, None)
            else:
                cache[name] = obj
            reconcile(cache, name)


def main() -> None:
    log(f"mirroring ConfigMaps labelled {SOURCE_LABEL}=yes in {NS} (apiserver {BASE})")
    while True:
        try:
            status, listed = call("GET", PATH)
            if status != 200:
                raise RuntimeError(f"list: HTTP {status} {listed}")
            cache = {item["metadata"]["name"]: item for item in listed.get("items") or []}
            for name in sorted(cache):
                reconcile(cache, name)
            watch(cache, listed["metadata"]["resourceVersion"])
        except (OSError, ValueError, RuntimeError) as err:
            log("relisting after:", err)
            time.sleep(0.5)


if __name__ == "__main__":
    main()
