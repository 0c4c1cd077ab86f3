"""The commands a `skiff up --netns` cluster is built with: `ip`, `ip netns exec`, `nft`.

Every failure is a `NetnsError` naming the command and what it printed. The names of a
cluster's namespaces (`skiff-<id>-<host>`) and of its nftables table (`inet skiff_<id>`)
are made here, so every module spells them alike.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from skiff.cluster.processes import StartError

CUT_COMMENT = "skiff-cut"  # every partition rule's comment starts with it
# The module of the gateway process (`python -m`), which a restart cannot replace.
GATEWAY_MODULE = "skiff.cluster.netns.gateway"


class NetnsError(StartError):
    """Namespaces or nftables could not be set up or changed; says what and why."""


def require_netns_support() -> None:
    """Root, `ip` and `nft`: the one clear error when any is missing."""
    if sys.platform != "linux":
        raise NetnsError("--netns needs Linux network namespaces")
    if os.geteuid() != 0:
        raise NetnsError("--netns creates network namespaces, veths and nftables rules and "
                         "needs root: run it as root (sudo), or use plain `skiff up`")
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            raise NetnsError(f"--netns needs `{tool}`: install it with "
                             f"`apt-get install {package}`")


def run(*argv: str, stdin: str | None = None, check: bool = True) -> str:
    done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                          timeout=30, check=False)
    if check and done.returncode != 0:
        detail = (done.stderr.strip() or done.stdout.strip() or
                  f"exit code {done.returncode}").splitlines()[-1]
        raise NetnsError(f"`{' '.join(argv)}` failed: {detail}")
    return done.stdout


def nft(netns: str, *args: str, stdin: str | None = None, check: bool = True) -> str:
    """`nft ARGS` inside `netns`."""
    return run("ip", "netns", "exec", netns, "nft", *args, stdin=stdin, check=check)


def cut_rules(netns: str, *listing: str, prefix: str) -> list[tuple[int, str]]:
    """(handle, comment) of every rule `nft list LISTING` shows in `netns` whose comment
    starts with `prefix` ([] when there is no such table or chain)."""
    out = nft(netns, "-j", "-a", "list", *listing, check=False)
    if not out.strip():
        return []
    rules = []
    for item in json.loads(out).get("nftables", []):
        rule = item.get("rule")
        if rule and str(rule.get("comment", "")).startswith(prefix):
            rules.append((int(rule["handle"]), str(rule["comment"])))
    return rules


def ns_exec(netns: str, argv: list[str]) -> list[str]:
    return ["ip", "netns", "exec", netns, *argv]


def namespace_name(cluster_id: str, host: str) -> str:
    return f"skiff-{cluster_id}-{host}"


def table_name(cluster_id: str) -> str:
    return f"skiff_{cluster_id}"
