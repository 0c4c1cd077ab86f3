"""The apiextensions.k8s.io rules (SPEC EX1–EX3): what a CustomResourceDefinition must be,
and how a custom object is checked, pruned and defaulted against its CRD's structural
schema (`openAPIV3Schema`) and CEL rules. Pure logic over plain dicts; the apiserver's
custom-resource strategy (`skiff.apiserver.registry.strategies.customresource`) calls it."""
