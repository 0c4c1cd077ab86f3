"""Targeted perturbations of one client identity's view (issue 35, part 1).

A stored Perturbation (skiff.io/v1) names a user or a group and asks this apiserver to
serve that identity a stale view (cached reads and watches as of an older revision) or to
let its watches miss events (dropped, or coalesced to each object's latest state). The
rules and their decisions are pure (rules.py, events.py); table.py keeps the stored
Perturbations current from the watch cache and answers the store's questions; watch.py
wraps one perturbed watcher's stream. With no Perturbation stored, the store pays one
dict check per read or watch and nothing else changes. A `crashOnWrite` rule counts the
identity's committed writes (the store's `wrote` hook) and kills its target once after the
k-th (crash.py decides, crasher.py kills and records). A `staleView.fromWrite` view pins
itself just before the identity's own k-th write. `record: true` journals the identity's
reads, watch events (with their fate) and writes on this apiserver (journal.py; the
store's read and watch hooks are recording.py), served as `perturbations/NAME/record`;
a perturbation that changes a request marks its span (traces.py).
"""

from skiff.apiserver.perturbation.table import PerturbationTable

__all__ = ["PerturbationTable"]
