"""Semantic phase classes: derived from ready/failed/warning/terminal phases, overridden per phase by
`phase_classes`, validated when the kind is registered, listed with each kind's state machine and used by the
console's badges (a custom ready phase is green and says "ready" in words)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from opsconsole.console.templatetags.console import badge
from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from reconcilers.engine import registry
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.services.selectors import kinds

HERE = "tests.reconcilers.test_phase_classes"


class ModelReconciler(Reconciler):
    """A kind with phases of its own: Serving is its ready phase, Warming declared a warning."""

    resource: ClassVar[ResourceKind] = ResourceKind("models.example.com", "v1", "models", "Model")
    state_machine: ClassVar[StateMachine] = StateMachine.build(
        "Model", states=("Loading", "Warming", "Serving", "Broken", "Gone"), initial="Loading",
        transitions={"Loading": ("Warming", "Broken"), "Warming": ("Serving", "Broken"),
                     "Serving": ("Gone",), "Broken": ("Gone",)}, terminal=("Gone",))
    ready_phases: ClassVar[tuple[str, ...]] = ("Serving",)
    failed_phase: ClassVar[str] = "Broken"
    phase_classes: ClassVar[dict[str, str]] = {"Warming": "warning"}

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result("Serving")


class WrongClassReconciler(ModelReconciler):
    """Declares a class that does not exist."""

    resource: ClassVar[ResourceKind] = ResourceKind("wrong.example.com", "v1", "wrongs", "Wrong")
    phase_classes: ClassVar[dict[str, str]] = {"Serving": "green"}


class UnknownStateReconciler(ModelReconciler):
    """Classes a phase its machine does not have."""

    resource: ClassVar[ResourceKind] = ResourceKind("unknown.example.com", "v1", "unknowns", "Unknown")
    phase_classes: ClassVar[dict[str, str]] = {"Sleeping": "ready"}


@pytest.fixture
def with_model(settings):
    settings.OPSCONSOLE_RECONCILERS = [f"{HERE}.ModelReconciler"]
    registry.reset()
    yield
    registry.reset()


def test_the_class_is_derived_from_the_kinds_phases_and_overridden_per_phase() -> None:
    rec = ModelReconciler()
    assert [rec.phase_class(s) for s in rec.state_machine.states] == [
        "progressing", "warning", "ready", "failed", "terminal"]
    memcached = MemcachedReconciler()
    assert memcached.phase_class("Running") == "ready"
    assert memcached.phase_class("RollingBack") == "warning"
    assert memcached.phase_class("Deleted") == "terminal"
    assert memcached.phase_class("Pending") == "progressing"


@pytest.mark.parametrize(("cls", "message"), [
    ("WrongClassReconciler", "phase_classes['Serving'] is 'green'"),
    ("UnknownStateReconciler", "'Sleeping', which is not a state"),
])
def test_a_wrong_phase_class_is_refused_when_the_kind_is_registered(settings, cls, message) -> None:
    settings.OPSCONSOLE_RECONCILERS = [f"{HERE}.{cls}"]
    registry.reset()
    try:
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
            registry.registered()
    finally:
        registry.reset()


def test_kind_list_gives_each_state_its_class(with_model) -> None:
    model = next(k for k in kinds.kind_list() if k["kind"] == "Model")
    assert model["state_machine"]["classes"] == {"Loading": "progressing", "Warming": "warning",
                                                 "Serving": "ready", "Broken": "failed", "Gone": "terminal"}


def test_a_custom_ready_phase_is_a_green_badge_that_says_ready_in_words(with_model) -> None:
    html = badge("Serving")
    assert 'class="badge badge-ok phase-ready"' in html
    assert '<span class="sr-only"> (ready)</span>' in html
    assert 'badge-warn phase-warning' in badge("Warming") and "(warning)" in badge("Warming")
    assert 'badge-bad phase-failed' in badge("Broken")
    assert 'badge-off phase-terminal' in badge("Deleted")  # Memcached's terminal state (built-in, first)
    assert badge("error") == '<span class="badge badge-bad">error</span>'  # a run result keeps its colour
    assert badge("True") == '<span class="badge badge-ok">True</span>'  # a condition status too
    assert badge("<b>x</b>") == '<span class="badge badge-none">&lt;b&gt;x&lt;/b&gt;</span>'
