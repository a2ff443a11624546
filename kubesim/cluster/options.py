"""Per-request write options (dry run, field validation, field manager) and the warnings a write produces."""

from __future__ import annotations

from dataclasses import dataclass, field

INTERNAL_MANAGER = "kube-controller-manager"  # writes by the simulated controllers (no request)


@dataclass
class WriteOptions:
    """What a create, update or patch request asked for."""

    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore
    field_manager: str | None = None
    force: bool = False
    warnings: list[str] = field(default_factory=list)
    user_agent: str | None = None  # the request's User-Agent; None for the simulator's own writes

    def manager(self) -> str:
        """The managedFields manager of a non-apply write: ``fieldManager``, else the User-Agent up to its first
        "/" (kube-apiserver's rule, at most 128 characters)."""
        if self.field_manager:
            return self.field_manager
        if self.user_agent is None:
            return INTERNAL_MANAGER
        return self.user_agent.split("/", 1)[0][:128]
