"""Node IPAM (SPEC SB1): gives each Node a `spec.podCIDR` carved from `--cluster-cidr`."""

from skiff.controller_manager.nodeipam.allocator import CidrSet, CidrSetFull
from skiff.controller_manager.nodeipam.controller import NodeIpamController

__all__ = ["CidrSet", "CidrSetFull", "NodeIpamController"]
