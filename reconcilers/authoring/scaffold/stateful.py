"""What `startkind --owns apps/v1/StatefulSet` adds to a kind: a PodDisruptionBudget beside the StatefulSet, the
zone spread (`topologySpreadConstraints`, DoNotSchedule), the budget fields, the Upgrading/Replacing/Blocked phases
and a reconcile that upgrades one ordinal at a time through `reconcilers.core.ordered_upgrade` (the judgement the
built-in KVStore uses). Applies when the StatefulSet is the kind's only workload; the renderer asks `ordered(s)`."""

from __future__ import annotations

from collections.abc import Callable
from string import Template

from reconcilers.authoring.scaffold.names import Owned, Scaffold

#: the renderer's template lookup (`rendering.template`)
Templates = Callable[[str], Template]

STATEFUL_SET = ("apps", "StatefulSet")
BUDGET = Owned("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True)
_READS = ('POD = ResourceKind("", "v1", "pods", "Pod", namespaced=True)  # read: the ordinals\' revision, readiness\n'
          'NODE = ResourceKind("", "v1", "nodes", "Node", namespaced=False)  # read: the zones')


def _only_workload_is_statefulset(owns: tuple[Owned, ...]) -> bool:
    workloads = [(o.group, o.kind) for o in owns if o.workload]
    return workloads == [STATEFUL_SET]


def with_budget(owns: tuple[Owned, ...]) -> tuple[Owned, ...]:
    """The owned kinds, with a PodDisruptionBudget added after the StatefulSet when it is the only workload."""
    if not _only_workload_is_statefulset(owns) or any((o.group, o.kind) == (BUDGET.group, BUDGET.kind) for o in owns):
        return owns
    return (*owns, BUDGET)


def ordered(s: Scaffold) -> bool:
    """Whether the kind gets the ordered upgrade (its only workload a StatefulSet, with its budget)."""
    return _only_workload_is_statefulset(s.owns) and any(o == BUDGET for o in s.owns)


def child_function(s: Scaffold, o: Owned, template: Templates) -> str | None:
    """The manifest functions of the StatefulSet (with the PDB's), '' for the PDB itself, None for other kinds."""
    if (o.group, o.kind) == STATEFUL_SET:
        return template("statefulset").substitute(kind=s.kind, api_version=o.api_version)
    if o == BUDGET:
        return ""
    return None


PHASES = ("- Pending: the first rollout is in progress (a new object; every spec change goes back through Pending);\n"
          "- Running: every ordinal is Ready on the current revision (reconcilers.core.rollout.rollout_status);\n"
          "- Degraded: it was Running and a pod is no longer Ready;\n"
          "- Upgrading / Replacing: a new template rolls out one ordinal at a time from the highest\n"
          "  (reconcilers.core.ordered_upgrade): Replacing while the ordinal just moved is replaced, Upgrading\n"
          "  between two steps; an ordinal moves only when the PodDisruptionBudget allows a disruption;\n"
          "- Blocked: the next step cannot be taken (BudgetExhausted, SpreadUnsatisfiable,\n"
          "  ProgressDeadlineExceeded); it resumes by itself once the cause clears;")


def kind_overrides(s: Scaffold, template: Templates) -> dict[str, str]:
    """The parts of kind.py that differ for an ordered StatefulSet kind."""
    t = template
    return {
        "phase_names": t("phase_names_ordered").template,
        "machine": t("machine_ordered").substitute(kind=s.kind, group=s.group),
        "time_import": "import time\n",
        "core_import": "from reconcilers.core import ordered_upgrade as ou\n",
        "status_model": t("status_model_ordered").substitute(kind=s.kind),
        "phases": PHASES,
        "extra_fields": t("statefulset_fields").template,
        "extra_resources": _READS,
        "poll": ("    #: how often a rollout in progress is looked at without an event from a child\n"
                 "    poll_seconds = 2.0\n"
                 "    #: the pods (revision, readiness) and nodes (zones) the upgrade is judged on\n"
                 "    rbac_reads = (POD, NODE)\n"
                 "    #: a transition into Blocked posts a Warning Event\n"
                 "    warning_phases = (BLOCKED, DEGRADED)\n"),
    }


def reconcile_body(s: Scaffold, template: Templates) -> str:
    """reconcile(): the other children applied, then the rollout or the ordered upgrade's next step."""
    lines = ['        """Apply the children, then take the ordered upgrade\'s next step (or judge the rollout)."""',
             f"        spec: {s.kind}Spec = ctx.spec"]
    for o in s.owns:
        if not o.workload and o != BUDGET:
            lines.append(f"        ctx.apply_child({o.name}_manifest(obj, spec))")
    return "\n".join(lines) + "\n" + template("reconcile_ordered").template
