"""`skiff join`'s library (SPEC JN3): token discovery of the cluster's CA, the kubelet's TLS
bootstrap by CertificateSigningRequest, and the certificate requests the kubelet renews
itself with. The CLI (`skiff.cli.join`) and the kubelet's certificate manager use it; it
imports neither.
"""
