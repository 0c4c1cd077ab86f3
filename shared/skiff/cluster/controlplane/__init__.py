"""The control plane as kind and kubeadm show it: a control-plane Node and mirror pods.

Kubernetes' kubelet runs kubeadm's control plane as static pods and writes a mirror pod for
each into `kube-system`; Skiff's control plane is run by `skiff up` and its supervisor
instead. The node agent (`python -m skiff.cluster.controlplane`, started by `skiff up` as the
`control-plane` component) plays that kubelet's part for it: it registers the control-plane
Node(s) (role label, `node-role.kubernetes.io/control-plane:NoSchedule` taint, a Lease),
keeps one mirror pod per component in step with the supervisor's view in cluster.json, and
serves the components' log files on the Node's kubelet endpoint, so `kubectl get pods -n
kube-system` and `kubectl logs` work as on a kind cluster. See `mirror` for the objects,
`node` for the Nodes and the mirror-pod sync, `logs` for the log endpoint and `agent` for
the process.
"""
