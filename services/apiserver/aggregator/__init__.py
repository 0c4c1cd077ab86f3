"""The aggregation layer (SPEC EX8, kube-aggregator): APIServices register extension
apiservers for group/versions; this apiserver lists them in discovery, proxies their
requests over TLS with the user in front-proxy headers, and keeps each APIService's
`Available` condition (and the local ones for what it serves itself).

`front` is what the HTTP front calls, `table` the APIServices as requests read them,
`proxy` the HTTPS client, `headers` the front-proxy headers, `discovery` the `/apis`
merge, `availability` the condition controller, `local` the local APIServices,
`authtrust` the front-proxy trust published for extension apiservers.
"""

from skiff.apiserver.aggregator.authtrust import AuthenticationTrust, comma_list
from skiff.apiserver.aggregator.availability import AvailabilityController
from skiff.apiserver.aggregator.front import Aggregator
from skiff.apiserver.aggregator.proxy import Proxier, ProxyClientCertificate
from skiff.apiserver.aggregator.table import ApiServiceTable, Registration

__all__ = ["Aggregator", "ApiServiceTable", "AuthenticationTrust", "AvailabilityController",
           "ProxyClientCertificate", "Proxier", "Registration", "comma_list"]
