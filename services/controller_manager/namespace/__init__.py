"""Namespace deletion: empty a Terminating namespace, then let it go."""

from skiff.controller_manager.namespace.controller import NamespaceController

__all__ = ["NamespaceController"]
