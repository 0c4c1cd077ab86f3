"""Pod streams through the apiserver: exec, attach and port-forward proxied to the kubelet
(proxy.py) over WebSocket or SPDY (spdy.py, portforward.py)."""
