"""`skiff check history`: Jepsen's method for Skiff's own API (issue 35, item 3).

A workload (`runner`) drives concurrent compare-and-set updates, consistent reads,
`resourceVersion=0` reads and resumed watches of a few ConfigMaps through every apiserver
and records each operation with its invoke/complete wall-clock times (`model`). The pure
checker (`check`) reads that history and reports lost acknowledged writes, stale
consistent reads, real-time order violations and watch gaps, duplicates and reorderings;
stale cached reads are reported as allowed. Kept apart from the runner so that histories
built by hand (the unit tests) or saved to a file are checked by the same code.
"""

from skiff.checker.history.check import FORBIDDEN, Anomaly, Report, check
from skiff.checker.history.model import History, Observation, Op, WatchRecord

__all__ = ["FORBIDDEN", "Anomaly", "History", "Observation", "Op", "Report", "WatchRecord",
           "check"]
