"""ServiceAccounts (SPEC AX3): every namespace gets its `default` ServiceAccount."""

from skiff.controller_manager.serviceaccount.controller import ServiceAccountsController

__all__ = ["ServiceAccountsController"]
