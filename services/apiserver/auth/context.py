"""The authenticated user of the request being served, for whoever needs it below the
front: admission (NodeRestriction, PodSecurity), escalation checks, streaming. The fronts
set it after authentication (endpoints/guard.py); it stays None in the insecure mode.
"""

from __future__ import annotations

from contextvars import ContextVar

from skiff.auth import UserInfo

current_user: ContextVar[UserInfo | None] = ContextVar("skiff_current_user", default=None)
