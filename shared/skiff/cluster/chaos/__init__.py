"""Faults on purpose: partitions (`partitions`, over netns or Docker) and member crashes
and hold-downs (`members`), what `skiff chaos` runs."""
