"""The at-most-one checker (SPEC SC2): proof that no two processes of one identity overlap.

`heartbeat` is the workload a StatefulSet pod runs: while alive as `<set>-<ordinal>` it
appends (identity, pod UID, PID, monotonic and wall time) to a log the test reads and to
its volume. `report` reads those lines and finds every interval during which two different
pod UIDs of one identity were alive at once, and the time from a partition to the
replacement's first heartbeat.

`skiff.checker.history` is the other checker: the API's own guarantees under faults
(`skiff check history`, Jepsen's method).
"""

from skiff.checker.report import Heartbeat, Overlap, overlaps, parse_lines, time_to_first_heartbeat

__all__ = ["Heartbeat", "Overlap", "overlaps", "parse_lines", "time_to_first_heartbeat"]
