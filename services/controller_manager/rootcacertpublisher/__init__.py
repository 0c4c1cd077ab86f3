"""`kube-root-ca.crt` in every namespace: the cluster CA for in-cluster clients."""

from skiff.controller_manager.rootcacertpublisher.controller import RootCACertPublisher

__all__ = ["RootCACertPublisher"]
