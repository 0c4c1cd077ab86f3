"""`skiff join <api-address> --token <id.secret> --discovery-token-ca-cert-hash sha256:<hex>`:
a kubelet on this machine joins the cluster (SPEC JN3), as `kubeadm join` makes a node.

The work is `skiff.join` (discovery, the name check, the client certificate by CSR); this
module parses the line, prints what happened and runs the kubelet with the identity it got:
in the foreground (the kubelet replaces this process) or, with `--detach`, in the
background with its log and pid file in the node's directory. That kubelet gets its serving
certificate by a `kubernetes.io/kubelet-serving` CSR after it registers and renews both
certificates before they expire.

Run again with the same node name and data dir (a node restarting), it starts the kubelet
with the credentials the node already holds when they are still valid (skiff.join.identity),
as a kubelet with an existing kubeconfig does: no discovery, no CSR, no taken-name check.
Stale ones (expired, another CA, unreadable) mean a bootstrap again, as a newcomer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from skiff.bootstraptoken import TokenError, parse_token
from skiff.cli.resources import CliError
from skiff.client.kubelet import ENV_KUBELET_TLS_CERT, ENV_KUBELET_TLS_KEY
from skiff.cluster.processes import python_module
from skiff.join.discovery import ClusterInfo, JoinError
from skiff.join.identity import held_identity
from skiff.join.node import NodeFiles, bootstrap_node, local_address

__all__ = ["add_commands", "kubelet_command"]

KUBELET_PORT, KUBELET_HEALTH_PORT = 10250, 10248  # Kubernetes' kubelet ports


def pods_api_address(*, address: str, server: str) -> str:
    """The HTTPS API the node's pods get (KUBERNETES_SERVICE_HOST/PORT): cluster-info's
    server when it is on the host the node dials (`skiff up --advertise-address`), else
    none (a `--netns` cluster's names the CLI's gateway on the control plane's loopback)."""
    host, _, port = server.partition("://")[2].rstrip("/").rpartition(":")
    return f"{host}:{port}" if host and host == address.rpartition(":")[0] else ""


def kubelet_command(*, address: str, node_name: str, node_ip: str, files: NodeFiles,
                    extra: list[str], server: str = "") -> tuple[list[str], dict[str, str]]:
    """The kubelet's argv and environment for a joined node (`server`: cluster-info's)."""
    pods_api = pods_api_address(address=address, server=server)
    argv = [*python_module("skiff.kubelet"), "--apiserver", address, "--node-name",
            node_name, "--node-ip", node_ip, "--root-dir", str(files.data_dir / "kubelet"),
            "--root-ca-file", str(files.ca_file), "--port", str(KUBELET_PORT),
            "--health-port", str(KUBELET_HEALTH_PORT), "--rotate-certificates", "true",
            "--server-tls-bootstrap", "true",
            *(["--kube-api-address", pods_api] if pods_api else []), *extra]
    env = {**files.credentials().to_env(),
           ENV_KUBELET_TLS_CERT: str(files.serving.cert_file),
           ENV_KUBELET_TLS_KEY: str(files.serving.key_file)}
    return argv, env


def add_commands(add: Callable[..., argparse.ArgumentParser], *,
                 out: Callable[[str], None]) -> None:
    """`skiff join`."""
    p = add("join", help="join this machine to a cluster as a node (kubeadm join)")
    p.add_argument("address", metavar="API_ADDRESS",
                   help="the apiserver's gRPC address HOST:PORT, as `skiff token create "
                        "--print-join-command` prints it")
    p.add_argument("--token", required=True, help="a bootstrap token <id>.<secret>")
    p.add_argument("--discovery-token-ca-cert-hash", action="append", default=[],
                   metavar="sha256:HEX", dest="ca_hashes",
                   help="the cluster CA's public key hash (repeatable)")
    p.add_argument("--node-name", default="", help="the Node's name (default: the host "
                                                   "name)")
    p.add_argument("--node-ip", default="", help="the Node's address (default: this "
                                                 "machine's address toward the API)")
    p.add_argument("--detach", action="store_true",
                   help="start the kubelet in the background and return")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to wait for the API on each step")
    p.add_argument("--csr-timeout", type=float, default=120.0,
                   help="seconds to wait for the client certificate to be approved and "
                        "signed")
    p.add_argument("--kubelet-arg", action="append", default=[], metavar="--FLAG=VALUE",
                   help="an extra kubelet flag (repeatable), e.g. --kubelet-arg=--sandbox=none")

    def run(args: argparse.Namespace) -> None:
        try:
            token = parse_token(args.token)
        except TokenError as err:
            raise CliError(f"error: {err}") from None
        name = args.node_name or socket.gethostname().split(".")[0].lower()
        files = NodeFiles(Path(args.data_dir) / "joined" / name)
        held = held_identity(files, node_name=name, ca_hashes=args.ca_hashes)
        try:
            node_ip = args.node_ip or local_address(args.address)
            if held.identity is None:
                if held.stale:
                    out(f"[kubelet-start] the credentials in {files.data_dir} are no longer "
                        f"valid ({held.stale}): bootstrapping again")
                info, csr = asyncio.run(bootstrap_node(
                    args.address, token=token, ca_hashes=args.ca_hashes, node_name=name,
                    files=files, timeout=args.timeout, csr_timeout=args.csr_timeout,
                    stale=held.stale))
        except JoinError as err:
            raise CliError(f"error: {err}") from None
        if held.identity is not None:
            info = ClusterInfo(address=args.address, ca_pem=held.identity.ca_pem,
                               server=held.identity.server)
            out(f"[kubelet-start] this node already holds the identity system:node:{name} "
                f"({files.client.cert_file}, valid until "
                f"{held.identity.not_after:%Y-%m-%dT%H:%M:%SZ}): no new CSR")
        else:
            out(f"[discovery] cluster-info signed by token {token.id!r}, CA pinned "
                f"({', '.join(args.ca_hashes)})")
            out(f"[kubelet-start] client certificate for system:node:{name} from CSR {csr}, "
                f"written to {files.client.cert_file}")
        argv, env = kubelet_command(address=info.address, node_name=name, node_ip=node_ip,
                                    files=files, extra=args.kubelet_arg, server=info.server)
        out("[kubelet-start] the kubelet asks for its serving certificate "
            "(kubernetes.io/kubelet-serving) once its Node is registered; the controller-"
            "manager approves it when it names only the Node's own addresses, otherwise "
            "`kubectl certificate approve` it")
        if not args.detach:
            out(f"This node has joined the cluster; running the kubelet of {name!r}. "
                "Run `kubectl get nodes` on the control plane to see it.")
            sys.stdout.flush()
            os.execve(argv[0], argv, {**os.environ, **env})
        log_path = files.data_dir / "kubelet.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env={**os.environ, **env},
                                    start_new_session=True)
        (files.data_dir / "kubelet.pid").write_text(f"{proc.pid}\n")
        time.sleep(0.5)
        if proc.poll() is not None:
            raise CliError(f"error: the kubelet exited at once ({proc.returncode}); see "
                           f"{log_path}")
        out(f"This node has joined the cluster: kubelet {name!r} pid {proc.pid}, log "
            f"{log_path}. Run `kubectl get nodes` on the control plane to see it.")

    p.set_defaults(func=run)
