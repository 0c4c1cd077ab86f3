"""Leader election lives in the client library (`skiff.client.leaderelection`), shared with
the scheduler; this name stays for the controller-manager's imports."""

from skiff.client.leaderelection import (
    LeaderElectionConfig,
    LeaderElectionRecord,
    LeaderElector,
    election_client,
    held_by_other,
)

__all__ = ["LeaderElectionConfig", "LeaderElectionRecord", "LeaderElector", "election_client",
           "held_by_other"]
