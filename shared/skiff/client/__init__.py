"""How components reach the apiserver: the `Client` protocol and its gRPC implementation
(`ApiClient`; an in-memory one for tests in `skiff.client.fake`), informers, the workqueue
and the controller worker loop."""

from skiff.client.api import ApiClient
from skiff.client.credentials import Credentials
from skiff.client.events import NORMAL, WARNING, EventRecorder
from skiff.client.informer import (
    BY_NAMESPACE,
    BY_NODE_NAME,
    Indexer,
    Informer,
    index_by_namespace,
    index_by_node_name,
    object_key,
)
from skiff.client.interface import Client, WatchEvent
from skiff.client.logs import pod_logs

__all__ = [
    "BY_NAMESPACE", "BY_NODE_NAME", "NORMAL", "WARNING", "ApiClient", "Client", "Credentials",
    "EventRecorder", "Indexer", "Informer", "WatchEvent", "index_by_namespace",
    "index_by_node_name", "object_key", "pod_logs",
]
