"""Per-request write options (dry run, field validation, field manager) and the warnings a write produces."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WriteOptions:
    """What a create, update or patch request asked for."""

    dry_run: bool = False
    field_validation: str = "Warn"  # Strict | Warn | Ignore
    field_manager: str | None = None
    force: bool = False
    warnings: list[str] = field(default_factory=list)
