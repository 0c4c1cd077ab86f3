"""`skiff token create|list|delete`: bootstrap tokens for joining nodes (SPEC JN3), as
`kubeadm token` manages them.

`create` writes a `bootstrap-token-<id>` Secret in kube-system and prints `<id>.<secret>`
(or, with `--print-join-command`, the `skiff join` line with the CA's
`--discovery-token-ca-cert-hash` and an address another machine can dial: the advertised
one of `skiff up --advertise-address`, a `--netns` cluster's apiserver host, or `--server`).
Like kubeadm's bootstrap-token phase it also makes sure the `cluster-info` ConfigMap in
kube-public exists (the cluster's HTTPS address and CA, which the bootstrapsigner signs
with each signing token) and that anonymous users may read it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import yaml

from skiff.api import ApiError, Reason
from skiff.api.types import Obj, ObjView
from skiff.bootstraptoken import (
    CLUSTER_INFO,
    CLUSTER_INFO_NAMESPACE,
    DEFAULT_NODE_GROUP,
    DESCRIPTION_KEY,
    EXTRA_GROUPS_KEY,
    KNOWN_USAGES,
    KUBECONFIG_KEY,
    NAMESPACE,
    SECRET_PREFIX,
    SECRET_TYPE,
    TOKEN_ID_KEY,
    TOKEN_ID_RE,
    TOKEN_SECRET_KEY,
    USAGE_PREFIX,
    TokenError,
    ca_cert_hash,
    expiration,
    generate_token,
    parse_token,
    secret_data,
    token_secret,
)
from skiff.cli.resources import CliError
from skiff.client import ApiClient
from skiff.client.credentials import ENV_CA
from skiff.clock import rfc3339
from skiff.cluster.netns.cluster import API_PORT as NETNS_API_PORT
from skiff.cluster.netns.hosts import network_of
from skiff.cluster.state import ClusterState
from skiff.settings import parse_duration

__all__ = ["add_commands", "cluster_info_objects", "ensure_cluster_info",
           "publish_cluster_info"]

RBAC = "rbac.authorization.k8s.io"
CLUSTER_INFO_ROLE = "skiff:bootstrap-signer-clusterinfo"  # kubeadm's kubeadm:… role


def cluster_info_objects(*, server: str, ca_pem: bytes) -> list[Obj]:
    """The `cluster-info` ConfigMap (a kubeconfig naming only the cluster: its server and
    CA) and the Role and RoleBinding that let `system:anonymous` get it, as kubeadm's
    clusterinfo phase makes them."""
    kubeconfig = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "", "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "contexts": None, "current-context": "", "preferences": {}, "users": None},
        sort_keys=True)
    meta = {"namespace": CLUSTER_INFO_NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": CLUSTER_INFO, **meta}, "data": {KUBECONFIG_KEY: kubeconfig}},
        {"apiVersion": f"{RBAC}/v1", "kind": "Role",
         "metadata": {"name": CLUSTER_INFO_ROLE, **meta},
         "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                    "resourceNames": [CLUSTER_INFO], "verbs": ["get"]}]},
        {"apiVersion": f"{RBAC}/v1", "kind": "RoleBinding",
         "metadata": {"name": CLUSTER_INFO_ROLE, **meta},
         "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": CLUSTER_INFO_ROLE},
         "subjects": [{"apiGroup": RBAC, "kind": "User", "name": "system:anonymous"}]},
    ]


def _kubeconfig_server(data_dir: Path) -> str:
    """The current context's server in the data dir's kubeconfig ("" without one)."""
    try:
        config = yaml.safe_load((data_dir / "kubeconfig").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return ""
    current = config.get("current-context")
    cluster = next((c.get("context", {}).get("cluster") for c in config.get("contexts") or []
                    if c.get("name") == current), None)
    for c in config.get("clusters") or []:
        if c.get("name") == cluster:
            return str((c.get("cluster") or {}).get("server") or "")
    return ""


async def _ensure(api: ApiClient, obj: Obj) -> None:
    """Create `obj`; a cluster-info that names another server or CA (the cluster came up
    on other ports) gets the current kubeconfig, which the bootstrapsigner signs again."""
    try:
        await api.create(obj)
    except ApiError as err:
        if err.reason != Reason.ALREADY_EXISTS:
            raise
        if obj["kind"] != "ConfigMap":
            return
        meta = obj["metadata"]
        current = await api.get("configmaps", meta["name"], meta["namespace"])
        data = dict(current.get("data") or {})
        if data.get(KUBECONFIG_KEY) != obj["data"][KUBECONFIG_KEY]:
            data[KUBECONFIG_KEY] = obj["data"][KUBECONFIG_KEY]
            await api.update({**current, "data": data})


def _ca_pem() -> bytes:
    path = os.environ.get(ENV_CA, "")
    if not path:
        raise CliError("error: the cluster has no CA (an --insecure cluster cannot join "
                       "nodes with bootstrap tokens)")
    return Path(path).read_bytes()


async def ensure_cluster_info(api: ApiClient, *, data_dir: Path) -> None:
    """cluster-info (and who may read it) for the data dir's cluster: its kubeconfig's
    server and the CA. Nothing for an --insecure cluster (no CA to publish)."""
    path = os.environ.get(ENV_CA, "")
    server = _kubeconfig_server(data_dir)
    if not path or not server:
        return
    for obj in cluster_info_objects(server=server, ca_pem=Path(path).read_bytes()):
        await _ensure(api, obj)


def publish_cluster_info(target: str, *, data_dir: Path,
                         warn: Callable[[str], None]) -> None:
    """`skiff up`'s step (kubeadm init's clusterinfo phase): cluster-info names the address
    the cluster came up on. A failure is a warning: `skiff token create` tries again."""

    async def run() -> None:
        async with ApiClient(target) as api:
            await ensure_cluster_info(api, data_dir=data_dir)

    try:
        asyncio.run(run())
    except (ApiError, OSError) as err:
        warn(f"warning: cluster-info not published ({err}); `skiff token create` retries")


def join_address(server: str, *, data_dir: Path, explicit: bool) -> str:
    """The gRPC address `skiff join` is told to dial: the first of the API addresses the CLI
    uses (`skiff up --advertise-address`'s when set), or for a `--netns` cluster, whose CLI
    goes through a gateway on 127.0.0.1, its first apiserver host's own address."""
    state = None if explicit else ClusterState.load(data_dir)
    if state is not None and state.netns:
        first = next((c.name for c in state.components if c.name.startswith("apiserver")),
                     "")
        if first in network_of(state).hosts:
            return f"{network_of(state).host(first).ip}:{NETNS_API_PORT}"
    return server.split(",")[0]


def _list(values: list[str] | None, default: list[str]) -> list[str]:
    if values is None:
        return default
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def _ttl_text(expires: float | None, now: float) -> str:
    if expires is None:
        return "<forever>"
    left = expires - now
    if left < 0:
        return "<invalid>"
    for unit, seconds in (("d", 86400), ("h", 3600), ("m", 60)):
        if left >= seconds:
            return f"{int(left // seconds)}{unit}"
    return f"{int(left)}s"


def token_rows(secrets: Sequence[ObjView], *, now: float) -> list[list[str]]:
    """`skiff token list`'s rows (kubeadm's columns), for the valid token Secrets."""
    rows = [["TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION", "EXTRA GROUPS"]]
    for secret in secrets:
        if secret.get("type") != SECRET_TYPE:
            continue
        token_id = secret_data(secret, TOKEN_ID_KEY)
        if not TOKEN_ID_RE.match(token_id):
            continue
        expires = expiration(secret)
        usages = [u for u in KNOWN_USAGES if secret_data(secret, USAGE_PREFIX + u) == "true"]
        rows.append([
            f"{token_id}.{secret_data(secret, TOKEN_SECRET_KEY)}", _ttl_text(expires, now),
            "<never>" if expires is None else (
                "<invalid>" if expires == float("-inf") else rfc3339(expires)),
            ",".join(sorted(usages)) or "<none>",
            secret_data(secret, DESCRIPTION_KEY) or "<none>",
            secret_data(secret, EXTRA_GROUPS_KEY) or "<none>"])
    return rows


def _format(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def add_commands(add: Callable[..., argparse.ArgumentParser],
                 add_to: Callable[..., argparse.ArgumentParser], *,
                 with_client: Callable[[argparse.Namespace,
                                        Callable[[ApiClient], Awaitable[None]]], None],
                 find_server: Callable[[argparse.Namespace], str],
                 out: Callable[[str], None]) -> None:
    """`skiff token` and its `create`, `list` and `delete` subcommands."""
    token_p = add("token", help="bootstrap tokens that let nodes join (kubeadm token)")
    subs = token_p.add_subparsers(dest="token_command", required=True)
    create = add_to(subs, "create", help="create a bootstrap token and print it")
    create.add_argument("token", nargs="?", help="the token to create (<id>.<secret>; "
                                                 "default: a random one)")
    create.add_argument("--ttl", default="24h", help="how long until the token is deleted "
                                                     "(e.g. 30m, 24h; 0 = never)")
    create.add_argument("--usages", action="append",
                        help=f"comma-separated ({', '.join(KNOWN_USAGES)}; default both)")
    create.add_argument("--groups", action="append",
                        help=f"extra groups when authenticating (default {DEFAULT_NODE_GROUP})")
    create.add_argument("--description", default="", help="a human-readable note")
    create.add_argument("--print-join-command", action="store_true",
                        help="print the whole `skiff join` line instead of the token")
    list_p = add_to(subs, "list", help="list the bootstrap tokens")
    delete = add_to(subs, "delete", help="delete bootstrap tokens (by id or whole token)")
    delete.add_argument("tokens", nargs="+", metavar="TOKEN")

    def run_create(args: argparse.Namespace) -> None:
        try:
            ttl = parse_duration(args.ttl)
            token = parse_token(args.token) if args.token else generate_token()
            secret = token_secret(
                token, ttl=ttl, description=args.description,
                usages=_list(args.usages, list(KNOWN_USAGES)),
                groups=_list(args.groups, [DEFAULT_NODE_GROUP]))
        except (TokenError, ValueError) as err:
            raise CliError(f"error: {err}") from None
        lines: list[str] = []

        async def body(api: ApiClient) -> None:
            ca = _ca_pem()
            await ensure_cluster_info(api, data_dir=Path(args.data_dir))
            await api.create(secret)
            if args.print_join_command:
                address = join_address(
                    find_server(args), data_dir=Path(args.data_dir),
                    explicit=bool(args.server or os.environ.get("SKIFF_SERVER")))
                lines.append(f"skiff join {address} --token {token} "
                             f"--discovery-token-ca-cert-hash {ca_cert_hash(ca)}")
            else:
                lines.append(str(token))

        with_client(args, body)
        for line in lines:
            out(line)

    def run_list(args: argparse.Namespace) -> None:
        found: list[Obj] = []

        async def body(api: ApiClient) -> None:
            listed = await api.list("secrets", NAMESPACE)
            found.extend(listed.get("items") or [])

        with_client(args, body)
        rows = token_rows(found, now=time.time())
        if len(rows) > 1:
            out(_format(rows))

    def run_delete(args: argparse.Namespace) -> None:
        ids: list[str] = []
        for text in args.tokens:
            token_id = text.partition(".")[0] if "." in text else text
            try:
                if "." in text:
                    parse_token(text)
                elif not TOKEN_ID_RE.match(text):
                    raise TokenError(f"given token didn't match pattern "
                                     f"{TOKEN_ID_RE.pattern[2:-2]!r} or "
                                     "'[a-z0-9]{6}\\.[a-z0-9]{16}'")
            except TokenError as err:
                raise CliError(f"error: {err}") from None
            ids.append(token_id)
        deleted: list[str] = []

        async def body(api: ApiClient) -> None:
            for token_id in ids:
                try:
                    await api.delete("secrets", f"{SECRET_PREFIX}{token_id}", NAMESPACE)
                except ApiError as err:
                    if err.reason == Reason.NOT_FOUND:
                        raise CliError(f"error: bootstrap token {token_id!r} not found") \
                            from None
                    raise
                deleted.append(token_id)

        try:
            with_client(args, body)
        finally:
            for token_id in deleted:
                out(f"bootstrap token {json.dumps(token_id)} deleted")

    create.set_defaults(func=run_create)
    list_p.set_defaults(func=run_list)
    delete.set_defaults(func=run_delete)
