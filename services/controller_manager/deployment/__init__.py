"""Deployment: ReplicaSets by pod-template hash, rolled by RollingUpdate or Recreate."""

from skiff.controller_manager.deployment.controller import DeploymentController

__all__ = ["DeploymentController"]
