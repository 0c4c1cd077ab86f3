"""Volume binding (SPEC SC1): each claim is bound to its own volume `pvc-<uid>`."""

from skiff.controller_manager.volumebinding.controller import VolumeBindingController

__all__ = ["VolumeBindingController"]
