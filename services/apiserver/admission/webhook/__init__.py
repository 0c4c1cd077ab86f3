"""Admission webhooks (SPEC EX6): the MutatingAdmissionWebhook and
ValidatingAdmissionWebhook plugins of the admission chain, which call the webhooks of the
stored Mutating/ValidatingWebhookConfigurations over HTTPS with AdmissionReview v1.

`hooks` reads the configurations, `matching` decides which webhooks a request calls,
`conditions` evaluates their CEL matchConditions, `review` is the wire format and its
errors, `client` the HTTPS call, `plugins` the two plugins.
"""

from skiff.apiserver.admission.webhook.client import Caller, HttpsCaller, ServiceResolver
from skiff.apiserver.admission.webhook.plugins import (
    MutatingWebhookAdmission,
    ValidatingWebhookAdmission,
    WebhookSource,
)

__all__ = ["Caller", "HttpsCaller", "MutatingWebhookAdmission", "ServiceResolver",
           "ValidatingWebhookAdmission", "WebhookSource"]
