"""The OpenAPI v2 and v3 documents of every served kind (schemas.py, also read for patch
strategies and apply's merge keys) and the v2 document in protobuf (protobuf.py)."""
