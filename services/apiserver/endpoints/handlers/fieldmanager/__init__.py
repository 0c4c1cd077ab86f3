"""`metadata.managedFields` and server-side apply (SPEC AX1): who owns which fields
(apply.py) and which manager name a gRPC client's writes are recorded under (managers.py)."""
