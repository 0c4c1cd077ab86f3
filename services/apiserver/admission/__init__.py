"""Admission: an ordered chain of plugins (chain.py) the registry runs on every create and
update, mutating hooks then validating ones, as kube-apiserver's admission chain. Each
plugin is a module (NamespaceLifecycle, LimitRanger, ServiceAccount, NodeRestriction,
Priority, DefaultTolerationSeconds, DefaultStorageClass, PodSecurity, ResourceQuota);
interface.py says what a plugin is. Webhooks will plug in here."""
