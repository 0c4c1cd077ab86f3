"""The registry, as kube-apiserver's generic registry: a store over storage (store.py) that
does every verb for every kind, and one strategy per resource (strategies/) holding what
differs between kinds: defaults and validation hooks, PrepareForCreate/PrepareForUpdate,
the status subresource's rules. Graceful deletion, the request's scope, the pod
subresources, TokenRequest and the Service allocators (service/) live beside it."""
