"""A Skiff cluster, started, supervised and broken on purpose — the launcher, as kind's
`pkg/cluster` is beside its `cmd/`; `skiff.cli` only parses, prints and calls in here.

`provider` is the seam: `new_cluster()` composes a `Cluster` from a `topology` (single or
HA) and a launcher (`local` processes or `netns` hosts, sharing `launch`, `processes` and
`teardown`); `down()` stops one. `state` is cluster.json (what the fence agent reads) and
`status` its health and roles; `supervisor` restarts what dies; `security`, `kubeconfig` and
`compose_pki` are the PKI; `chaos` is the partition seam (netns or Docker) and member
crashes; `controlplane` is the control-plane node agent (mirror pods).
"""
