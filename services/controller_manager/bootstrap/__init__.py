"""The bootstrap token controllers (SPEC JN3): the tokencleaner and the bootstrapsigner."""

from skiff.controller_manager.bootstrap.signer import BootstrapSigner
from skiff.controller_manager.bootstrap.tokencleaner import TokenCleaner

__all__ = ["BootstrapSigner", "TokenCleaner"]
