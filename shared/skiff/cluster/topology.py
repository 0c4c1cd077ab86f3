"""The shape of a cluster's control plane: how many of each member, and their names.

A cluster is a topology run by a launcher (local processes, `local`; or one network
namespace per host, `netns.cluster`). `SINGLE` is `skiff up`'s: one etcd member, one
apiserver, one scheduler and one controller-manager, each named plainly. `HA` is
`skiff up --ha`'s: three etcd members forming one cluster (real peer URLs, one
initial-cluster token), two apiservers, each a full replica with `--etcd-servers` listing
every member (its own first), and two schedulers and two controller-managers that elect a
leader through a Lease; every replica is numbered (`etcd-1`, `apiserver-2`,
`scheduler-1`, ...). Every service lists every apiserver, in an order that spreads them.

kubectl gets one kubeconfig cluster and context per apiserver (`skiff` = apiserver-1,
`skiff-apiserver-2`): kubectl has no failover of its own, and a front proxy would be one
more process that can die or be cut off, hiding exactly the failures HA exists to show.
"""

from __future__ import annotations

from dataclasses import dataclass

from skiff.cluster.controlplane.mirror import node_names

CLUSTER_TOKEN = "skiff-ha"
# Where each leader-elected service keeps its Lease (kube-system), newest name first.
LEASES = {"scheduler": ("kube-scheduler",),
          "controller-manager": ("kube-controller-manager", "skiff-controller-manager")}


def rotated(items: list[str], by: int) -> list[str]:
    by %= len(items)
    return items[by:] + items[:by]


@dataclass(frozen=True)
class Topology:
    """How many of each control-plane member; `numbered`: every replica's name carries
    its number (`scheduler-1`), else only the second and later do (`controller-manager-2`)."""

    etcd_members: int = 1
    apiservers: int = 1
    schedulers: int = 1
    controller_managers: int = 1
    numbered: bool = False

    @property
    def replicated_etcd(self) -> bool:
        """Several members: each keeps its data in `<data-dir>/<name>` and they form one
        cluster with a token and pre-vote."""
        return self.etcd_members > 1

    @property
    def start_timeout(self) -> float:
        """Seconds a member may take to become healthy (a quorum takes longer)."""
        return 60.0 if self.replicated_etcd or self.apiservers > 1 else 30.0

    def names(self, member: str, count: int) -> list[str]:
        if self.numbered:
            return [f"{member}-{i}" for i in range(1, count + 1)]
        return [member] + [f"{member}-{i}" for i in range(2, count + 1)]

    def etcd_names(self) -> list[str]:
        return self.names("etcd", self.etcd_members)

    def apiserver_names(self) -> list[str]:
        return self.names("apiserver", self.apiservers)

    def replicas(self, service: str) -> list[str]:
        """The names of a leader-elected service's replicas (scheduler, controller-manager);
        each is also its Lease identity, so a restarted one takes its own Lease back at
        once instead of waiting out a predecessor's."""
        count = self.schedulers if service == "scheduler" else self.controller_managers
        return self.names(service, count)

    def control_plane_nodes(self) -> list[str]:
        """One control-plane Node per replica number (kind's HA names)."""
        return node_names(max(self.etcd_members, self.apiservers, self.schedulers,
                              self.controller_managers))


SINGLE = Topology()
HA = Topology(etcd_members=3, apiservers=2, schedulers=2, controller_managers=2,
              numbered=True)
