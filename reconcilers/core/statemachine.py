"""State machines that each kind declares: its states, initial state, allowed transitions and terminal states.

The record asks the machine (`path`) before it records a phase change; a change the machine does not allow is
refused and recorded as an anomaly instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class IllegalTransition(Exception):
    """A phase change that the kind's state machine does not allow."""

    def __init__(self, machine: str, source: str, target: str) -> None:
        super().__init__(f"{machine}: {source or '(none)'} -> {target} is not an allowed transition")
        self.source = source
        self.target = target


@dataclass(frozen=True)
class StateMachine:
    """An immutable, validated state machine. Build one with `StateMachine.build(...)`."""

    name: str
    states: tuple[str, ...]
    initial: str
    transitions: frozenset[tuple[str, str]]
    terminal: frozenset[str]

    @classmethod
    def build(
        cls,
        name: str,
        *,
        states: Iterable[str],
        initial: str,
        transitions: Mapping[str, Iterable[str]],
        terminal: Iterable[str] = (),
    ) -> StateMachine:
        """Declare a machine; `transitions` maps each state to the states it may move to.

        Raises ValueError when the declaration is inconsistent: unknown states, a terminal state with
        outgoing edges, or states that cannot be reached from the initial one.
        """
        ordered = tuple(dict.fromkeys(states))
        known = set(ordered)
        if initial not in known:
            raise ValueError(f"{name}: initial state {initial!r} is not one of the states")
        edges: set[tuple[str, str]] = set()
        for source, targets in transitions.items():
            for target in targets:
                for state in (source, target):
                    if state not in known:
                        raise ValueError(f"{name}: transition {source} -> {target} names unknown state {state!r}")
                if source != target:
                    edges.add((source, target))
        terminal_set = frozenset(terminal)
        if not terminal_set <= known:
            raise ValueError(f"{name}: terminal states {sorted(terminal_set - known)} are not states")
        leaving = sorted(s for s, _ in edges if s in terminal_set)
        if leaving:
            raise ValueError(f"{name}: terminal states {leaving} have outgoing transitions")
        reachable, frontier = {initial}, [initial]
        while frontier:
            state = frontier.pop()
            for s, t in edges:
                if s == state and t not in reachable:
                    reachable.add(t)
                    frontier.append(t)
        if reachable != known:
            raise ValueError(f"{name}: states {sorted(known - reachable)} cannot be reached from {initial!r}")
        return cls(name, ordered, initial, frozenset(edges), terminal_set)

    def allows(self, source: str | None, target: str) -> bool:
        """True when moving from `source` to `target` is allowed. No phase yet may only enter the initial
        state; staying in the same state is not a transition and is always allowed."""
        if target not in self.states:
            return False
        if not source:
            return target == self.initial
        if source == target:
            return True
        return (source, target) in self.transitions

    def path(self, source: str | None, target: str) -> tuple[tuple[str, ...], bool]:
        """The phases a record passes through to move from `source` to `target`, and whether the move is
        refused. Already there: nothing. From no phase, the initial state comes first; then `target`, unless
        the machine refuses it (refused=True; the initial state is still entered)."""
        current = source or ""
        if target == current:
            return (), False
        steps: list[str] = []
        if not current and target != self.initial:
            steps.append(self.initial)
            current = self.initial
        if not self.allows(current, target):
            return tuple(steps), True
        if target != current:
            steps.append(target)
        return tuple(steps), False

    def check(self, source: str | None, target: str) -> None:
        """Raise IllegalTransition unless `allows(source, target)`."""
        if not self.allows(source, target):
            raise IllegalTransition(self.name, source or "", target)

    def successors(self, state: str) -> list[str]:
        """The states `state` may move to, in declaration order."""
        return [t for t in self.states if (state, t) in self.transitions]

    def is_terminal(self, state: str) -> bool:
        """True for a state with no way out (e.g. Deleted)."""
        return state in self.terminal

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready description for the API and the console's diagrams."""
        return {
            "name": self.name,
            "states": list(self.states),
            "initial": self.initial,
            "terminal": [s for s in self.states if s in self.terminal],
            "transitions": [{"from": s, "to": t} for s in self.states for t in self.successors(s)],
        }
