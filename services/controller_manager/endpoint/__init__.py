"""v1 Endpoints of Services: the older view of which pods serve, still what many tools read."""

from skiff.controller_manager.endpoint.controller import EndpointsController

__all__ = ["EndpointsController"]
