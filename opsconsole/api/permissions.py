"""Role permissions: viewer (read), operator (read + reconcile), admin (everything). Roles are Django groups
(see `opsconsole.accounts.roles`); namespace limits are applied by the selectors and services."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from opsconsole.accounts.roles import ADMIN, OPERATOR, VIEWER, user_has_role


class _HasRole(permissions.BasePermission):
    role = VIEWER
    message = "This needs the viewer role."

    def has_permission(self, request: Request, view: Any) -> bool:
        return user_has_role(request.user, self.role)


class IsViewer(_HasRole):
    """Any role may read."""

    role = VIEWER
    message = "Reading needs the viewer role (or operator, admin)."


class IsOperator(_HasRole):
    """Operators and admins may ask for reconciles."""

    role = OPERATOR
    message = "This action needs the operator role (or admin)."


class IsAdmin(_HasRole):
    """Admins only: other users' tokens, queue controls."""

    role = ADMIN
    message = "This action needs the admin role."
