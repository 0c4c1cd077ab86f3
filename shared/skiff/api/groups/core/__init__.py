"""The core ("" / v1) group, one module per resource family: pods and their spec and
template, nodes and namespaces, services, config (ConfigMaps, Secrets, ServiceAccounts),
volumes, ReplicationControllers, LimitRanges and ResourceQuotas."""
