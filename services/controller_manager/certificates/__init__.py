"""The certificate controllers (SPEC JN2): csrsigning issues approved
CertificateSigningRequests from the cluster CA; csrapproving approves kubelets' client CSRs
their requesters may create; csrcleaner deletes old ones."""

from skiff.controller_manager.certificates.cleaner import CsrCleanerController
from skiff.controller_manager.certificates.controllers import (
    CsrApprovingController,
    CsrSigningController,
)

__all__ = ["CsrApprovingController", "CsrCleanerController", "CsrSigningController"]
