"""PodGC (SPEC PS3): force-deletes pods that can never finish terminating on their own."""

from skiff.controller_manager.podgc.controller import PodGCController

__all__ = ["PodGCController"]
