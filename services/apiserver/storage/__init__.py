"""Storage under the registry: the `Storage` seam (interface.py) with etcd behind it
(etcd.py, its retries and leader fencing), the watch cache that fans one etcd watch out to
every watcher, compaction shared by the apiservers, and the watch-fed lookups admission
reads. memory.py is an in-memory `Storage` for unit tests."""
