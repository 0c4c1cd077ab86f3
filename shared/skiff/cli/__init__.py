"""The `skiff` command and the local-process cluster it starts."""
