"""Who may do what: authenticators (client certificates, bearer and ServiceAccount tokens,
impersonation), authorizers (Node, RBAC and their chain, escalation checks), the token
and access reviews, and the bootstrap RBAC policy as data (bootstrappolicy.py) apart from
the logic that reconciles it at start (reconcile.py)."""
