"""The apiserver's part of the extension API (SPEC EX1): what kube-apiserver's embedded
apiextensions-apiserver runs beside its REST storage — the controller that serves each
CustomResourceDefinition's resource, reports its conditions and, when the CRD is deleted,
deletes its objects first."""
