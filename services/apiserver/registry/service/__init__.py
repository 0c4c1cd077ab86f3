"""What a Service write holds beside its object: cluster IPs (clusterip.py) and node ports
(nodeports.py), each allocation held in etcd (holds.py) and repaired in the background."""
