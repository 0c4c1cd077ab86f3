"""The `skiff` command: argument parsing, printing, and calls into `skiff.cluster` (start,
stop, break a cluster) and `skiff.client` (work with its objects)."""
