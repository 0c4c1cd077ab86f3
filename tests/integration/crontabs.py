"""The CronTab CRD of the Kubernetes documentation, grown a little (status and scale
subresources, printer columns, a selectable field, a second served version), and objects
of it: the custom resource the extension API tests share (SPEC EX1–EX5)."""

from __future__ import annotations

import json
from typing import Any


def crontab_crd(group: str, *, scope: str = "Namespaced") -> str:
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.{group}
spec:
  group: {group}
  scope: {scope}
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.labelSelector
    selectableFields:
    - jsonPath: .spec.image
    additionalPrinterColumns:
    - name: Spec
      type: string
      jsonPath: .spec.cronSpec
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [cronSpec]
            properties:
              cronSpec:
                type: string
                pattern: '^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){{4}}$'
              image:
                type: string
              replicas:
                type: integer
                minimum: 1
                maximum: 10
                default: 1
          status:
            type: object
            properties:
              replicas: {{type: integer}}
              labelSelector: {{type: string}}
  - name: v2
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"""


def crontab(name: str, namespace: str, **spec: Any) -> str:
    return json.dumps({"apiVersion": f"{spec.pop('group')}/v1", "kind": "CronTab",
                       "metadata": {"name": name, "namespace": namespace},
                       "spec": spec})
