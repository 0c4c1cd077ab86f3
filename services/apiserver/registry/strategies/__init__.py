"""One strategy module per resource (or per small group of related resources), each holding
what its kind does differently from the generic strategy (registry/strategy.py);
catalog.py is the table the store looks them up in."""
