"""How components reach the apiserver: the API client, informers, and the workqueue."""

from skiff.client.api import ApiClient, WatchEvent
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
from skiff.client.logs import pod_logs

__all__ = [
    "ApiClient", "Credentials", "WatchEvent", "EventRecorder", "NORMAL", "WARNING", "BY_NAMESPACE",
    "BY_NODE_NAME", "Indexer", "Informer",
    "index_by_namespace", "index_by_node_name", "object_key", "pod_logs",
]
