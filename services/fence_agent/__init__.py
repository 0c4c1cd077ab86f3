"""Skiff's fence agent: acts on Fence objects with out-of-band access, like a BMC (SPEC FN2).

A separate service, so fencing does not depend on the node it fences: it watches Fence
objects and drives each through Pending → Fencing → Fenced | Failed (and Unfencing when a
user deletes it) with the agent the Fence names — `power` (every process of the node
stopped and kept down), `network` (the node's container cut from every network) or
`storage` (the node's volume attachments revoked). Agents implement `FenceAgent`.
"""

from skiff.fence_agent.agent import FenceAgent, FenceError, FenceStatus, UnsupportedAgent
from skiff.fence_agent.controller import FINALIZER, FenceController

__all__ = ["FINALIZER", "FenceAgent", "FenceController", "FenceError", "FenceStatus",
           "UnsupportedAgent"]
