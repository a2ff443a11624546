"""The rules of a declared state machine: what it allows, what it refuses, what it rejects as a declaration."""

from __future__ import annotations

import pytest

from reconcilers.core.statemachine import IllegalTransition, StateMachine


def machine() -> StateMachine:
    return StateMachine.build(
        "memcached",
        states=["Pending", "Running", "Degraded", "Failed", "Terminating", "Deleted"],
        initial="Pending",
        transitions={
            "Pending": ["Running", "Failed", "Terminating"],
            "Running": ["Pending", "Degraded", "Failed", "Terminating"],
            "Degraded": ["Running", "Pending", "Failed", "Terminating"],
            "Failed": ["Pending", "Terminating"],
            "Terminating": ["Deleted"],
        },
        terminal=["Deleted"],
    )


def test_it_allows_declared_transitions_and_refuses_others() -> None:
    m = machine()
    assert m.allows("Pending", "Running")
    assert m.allows("Running", "Degraded")
    assert not m.allows("Pending", "Deleted")
    assert not m.allows("Deleted", "Pending")
    with pytest.raises(IllegalTransition, match="Pending -> Deleted"):
        m.check("Pending", "Deleted")


def test_a_new_object_may_only_enter_the_initial_state() -> None:
    m = machine()
    assert m.allows(None, "Pending")
    assert m.allows("", "Pending")
    assert not m.allows(None, "Running")


def test_staying_in_a_state_is_not_a_transition_and_is_allowed() -> None:
    assert machine().allows("Running", "Running")


def test_unknown_target_states_are_refused() -> None:
    assert not machine().allows("Pending", "Exploded")


def test_terminal_states_and_successors_are_reported() -> None:
    m = machine()
    assert m.is_terminal("Deleted")
    assert not m.is_terminal("Failed")
    assert m.successors("Terminating") == ["Deleted"]


def test_as_dict_lists_every_edge_once_in_declaration_order() -> None:
    d = machine().as_dict()
    assert d["initial"] == "Pending"
    assert d["terminal"] == ["Deleted"]
    assert {"from": "Pending", "to": "Running"} in d["transitions"]
    assert len(d["transitions"]) == len({(e["from"], e["to"]) for e in d["transitions"]}) == 14


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"initial": "Nope"}, "initial state"),
        ({"transitions": {"A": ["Z"]}}, "unknown state"),
        ({"transitions": {"A": ["B"], "B": ["A"]}, "terminal": ["B"]}, "outgoing"),
        ({"transitions": {"A": []}}, "cannot be reached"),
        ({"terminal": ["Q"]}, "are not states"),
    ],
)
def test_inconsistent_declarations_are_rejected(kwargs: dict, message: str) -> None:
    args = {"states": ["A", "B"], "initial": "A", "transitions": {"A": ["B"]}, "terminal": []}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        StateMachine.build("bad", **args)


def test_path_names_the_phases_a_record_passes_through_and_whether_the_move_is_refused():
    machine = StateMachine.build("M", states=("Pending", "Running", "Failed", "Deleted"), initial="Pending",
                                 transitions={"Pending": ("Running", "Failed"), "Running": ("Failed", "Deleted"),
                                              "Failed": ("Running",)}, terminal=("Deleted",))
    assert machine.path("Running", "Running") == ((), False)
    assert machine.path(None, "Pending") == (("Pending",), False)
    assert machine.path("", "Running") == (("Pending", "Running"), False)  # the initial state first
    assert machine.path("Running", "Failed") == (("Failed",), False)
    assert machine.path("Failed", "Deleted") == ((), True)
    assert machine.path(None, "Deleted") == (("Pending",), True)  # entered, then refused
    assert machine.path("Running", "Nowhere") == ((), True)
