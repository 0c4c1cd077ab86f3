"""NodeName: a pod that names its node (`spec.nodeName`) fits only there."""

from skiff.scheduler.plugins.nodename.filtering import NodeName

__all__ = ["NodeName"]
