"""Pod sandboxes (SPEC SB1): the namespaces a pod's containers share, like CRI's sandbox.

As root, each pod gets a network namespace with an address from its node's `podCIDR`,
attached to a bridge that lives in Skiff's own "pod network" namespace (the host's
namespace gets no address, route, bridge or veth), and a UTS hostname; each of its
containers gets a root filesystem of its own (`rootfs`) and the identity and capabilities
its `securityContext` asks for (`security`, SPEC AU8). Without root and CAP_SYS_ADMIN +
CAP_NET_ADMIN (e.g. in an unprivileged container), or with `--sandbox=none`, pods share
the node as before, and say so.
"""

from skiff.kubelet.sandbox.manager import (
    NO_POD_CIDR_MESSAGE,
    NOT_ISOLATED_MESSAGE,
    Sandbox,
    SandboxError,
    SandboxManager,
    sandbox_supported,
)
from skiff.kubelet.sandbox.network import PodNetwork

__all__ = ["NOT_ISOLATED_MESSAGE", "NO_POD_CIDR_MESSAGE", "PodNetwork", "Sandbox", "SandboxError",
           "SandboxManager", "sandbox_supported"]
