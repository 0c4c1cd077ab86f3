"""Skiff's apiserver, laid out as Kubernetes lays out kube-apiserver: `endpoints` (the
fronts), `registry` (a generic store and one strategy per resource), `admission` (the
plugin chain), `auth` (who may do what), `storage` (etcd and the watch cache); `app` wires
them into the process (`skiff-apiserver`, see `__main__`)."""
