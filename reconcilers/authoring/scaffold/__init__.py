"""Scaffolding a new kind (`manage.py startkind`): a Python package with the kind, a sample and a test.

`plan(...)` (`planning`) checks every input and the target (`checks`), and renders every file in memory
(`rendering`, from the template files in `templates/`); it raises `ScaffoldError` (naming what is wrong) before
anything is written. `write(scaffold)` then writes the files, all or none (into a temporary directory beside the
target, renamed into place). `names` holds the vocabulary: defaults, name rules, Kubernetes' own kinds.

The generated kind follows `reconcilers/kinds/memcached.py`: a typed spec (a `KindModel`), the
Pending → Running / Degraded / Failed machine, `spec_change_phase = "Pending"`, one child per `--owns` entry
(Deployment, StatefulSet, Service, ConfigMap, Secret, ServiceAccount and Namespace have templates; any other
kind gets its metadata only) and a phase derived from the children: the rollout of its Deployment or
StatefulSet, judged by `reconcilers.core.rollout.rollout_status` (the generated code calls it; it copies no rule).
A kind that owns a Deployment also gets `spec.progressDeadlineSeconds` (the Deployment's own: a rollout that makes
no progress for that long is Failed) and tests that a broken image is not reported ready and is rolled back.
Owner and children must agree on scope: a namespaced kind owns only
namespaced kinds (Kubernetes' garbage collector refuses a cluster-scoped dependent of a namespaced owner), and
a cluster-scoped kind here owns only cluster-scoped kinds (a namespaced child needs a namespace, which the
author then takes from the spec, as `reconcilers/kinds/tenant.py` does).
"""

from __future__ import annotations

from reconcilers.authoring.scaffold.checks import parse_owns
from reconcilers.authoring.scaffold.names import (
    BUILTIN_KINDS,
    DEFAULT_IMAGE,
    DEFAULT_VERSION,
    WORKLOADS,
    Owned,
    Scaffold,
    ScaffoldError,
    plural_of,
)
from reconcilers.authoring.scaffold.planning import next_steps, plan, write
from reconcilers.authoring.scaffold.rendering import render, render_kind, render_sample, render_test, sample_object

__all__ = [
    "BUILTIN_KINDS", "DEFAULT_IMAGE", "DEFAULT_VERSION", "WORKLOADS", "Owned", "Scaffold", "ScaffoldError",
    "next_steps", "parse_owns", "plan", "plural_of", "render", "render_kind", "render_sample", "render_test",
    "sample_object", "write",
]
