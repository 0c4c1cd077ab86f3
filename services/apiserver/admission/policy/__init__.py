"""ValidatingAdmissionPolicy (SPEC EX7): the in-process admission plugin that evaluates the
stored ValidatingAdmissionPolicies' CEL validations through their bindings.

`source` reads the policies, bindings and param objects from watch-fed lookups, `matching`
decides which policies and bindings a request selects (with the webhooks' predicates),
`evaluation` runs one policy's CEL for one request and param, `plugin` is the plugin,
`status` sets the policies' status.observedGeneration.
"""

from skiff.apiserver.admission.policy.plugin import ValidatingAdmissionPolicyAdmission
from skiff.apiserver.admission.policy.source import ParamSource, PolicySource
from skiff.apiserver.admission.policy.status import PolicyStatus

__all__ = ["ParamSource", "PolicySource", "PolicyStatus", "ValidatingAdmissionPolicyAdmission"]
