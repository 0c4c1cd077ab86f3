"""EndpointSlices of Services: which pods serve, and which of them are ready."""

from skiff.controller_manager.endpointslice.controller import EndpointSliceController

__all__ = ["EndpointSliceController"]
