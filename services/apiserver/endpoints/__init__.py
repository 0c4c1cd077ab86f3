"""The apiserver's fronts, as kube-apiserver's `endpoints`: the Kubernetes HTTP API
(http.py, kubeapi.py dispatching by a route table in routes.py, discovery.py), the gRPC
service Skiff's components use (grpcservice.py), the request guard that authenticates and
authorizes both (guard.py), pod streaming (streaming/), protobuf and OpenAPI (openapi/),
health and metrics. Request handling shared by the fronts lives in handlers/."""
