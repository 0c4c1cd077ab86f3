"""The cyclic garbage collector's pace for long-running services (issue 37).

A control-plane process holds a large, long-lived heap (the apiserver's watch cache, the
scheduler's and informers' caches) and allocates many short-lived objects per request
(decoded objects, messages). With CPython's default thresholds (700, 10, 10) the collector
runs every 700 net allocations and walks the young generations over and over, and every
tenth of those promotes into a generation that is walked whole: profiles show its time
inside whatever allocates (msgpack decode). Kubernetes' components, in Go, pay no such
walk. What is allocated before serving (imports, schemas) is moved out of the collector's
sight (`gc.freeze`), and the youngest generation is collected every 50,000 allocations
(the oldest every 10 million, so cyclic garbage such as exceptions' tracebacks does not pile
up between full collections).
`SKIFF_GC_THRESHOLD` (e.g. "700,10,10") restores or changes the pace.
"""

from __future__ import annotations

import gc
import os

DEFAULT_THRESHOLD = (50_000, 20, 10)


def tune_gc() -> None:
    """Call once the process has imported what it needs, before it serves."""
    text = os.environ.get("SKIFF_GC_THRESHOLD", "")
    try:
        threshold = tuple(int(part) for part in text.split(",")) if text else DEFAULT_THRESHOLD
    except ValueError:
        threshold = DEFAULT_THRESHOLD
    gc.collect()
    gc.freeze()
    gc.set_threshold(*threshold[:3])
