"""The operator version a run records (reconcilers/engine/versions.py): the deployment's when configured, else the
distribution that provides the kind's code, else the kind's module."""

from __future__ import annotations

from importlib import metadata

from reconcilers.engine import versions
from reconcilers.kinds.memcached import MemcachedReconciler
from tests.reconcilers.testkinds import GadgetReconciler


def test_the_configured_version_names_every_run(settings) -> None:
    settings.OPSCONSOLE_OPERATOR_VERSION = "  registry.example/opsconsole:1.4.0-canary  "
    assert versions.operator_version(MemcachedReconciler()) == "registry.example/opsconsole:1.4.0-canary"
    settings.OPSCONSOLE_OPERATOR_VERSION = "x" * 300
    assert len(versions.operator_version(MemcachedReconciler())) == versions.MAX_LENGTH


def test_unconfigured_a_kind_is_run_by_the_distribution_that_provides_it(settings) -> None:
    settings.OPSCONSOLE_OPERATOR_VERSION = ""
    assert versions.operator_version(MemcachedReconciler()) == f"opsconsole {metadata.version('opsconsole')}"
    assert versions.operator_version(GadgetReconciler()) == "module tests.reconcilers.testkinds"
