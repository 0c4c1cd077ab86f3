"""The compose cluster (deploy/compose) on a real Docker engine, built the offline way."""
