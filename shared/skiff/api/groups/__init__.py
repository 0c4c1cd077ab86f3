"""One module per API group Skiff serves (core split by resource family under `core`).

Each exports `RULES` (`skiff.api.grouprules.GroupRules`): its kinds' defaulters, validators,
table columns and schemas, built over the primitives of `skiff.api.fieldchecks`,
`objectmeta`, `fielddefaults`, `columns` and `fieldschema`. `skiff.api.catalog` gathers them
for the dispatchers (`validation`, `defaults`, `tables`, `schema`).
"""
