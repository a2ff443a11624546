"""The registry: built-in kinds, kinds from installed packages' entry points and from OPSCONSOLE_RECONCILERS,
each once, looked up by key, resource and name."""

from __future__ import annotations

import sys
from typing import Any, ClassVar

import pytest

from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result
from reconcilers.engine import registry
from reconcilers.kinds.kvstore import KVStoreReconciler
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.kinds.tenant import TenantReconciler

BUILTIN = ["reconcilers.kinds.memcached.MemcachedReconciler", "reconcilers.kinds.tenant.TenantReconciler"]
HERE = "tests.reconcilers.engine.test_registry"


class WidgetReconciler(Reconciler):
    """A kind an installed package would declare (here through a fake distribution's entry point)."""

    resource: ClassVar[ResourceKind] = ResourceKind("widgets.example.com", "v1", "widgets", "Widget")
    state_machine: ClassVar[StateMachine] = StateMachine.build(
        "Widget", states=("Pending", "Running"), initial="Pending", transitions={"Pending": ("Running",)})

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        return Result("Running")


class OtherWidgetReconciler(WidgetReconciler):
    """A second reconciler for the same resource."""


@pytest.fixture(autouse=True)
def fresh(settings):
    settings.OPSCONSOLE_RECONCILERS = []
    settings.OPSCONSOLE_BUILTIN_KINDS = True
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = True
    registry.reset()
    yield
    registry.reset()


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """Install a fake distribution declaring `opsconsole.kinds` entry points: `installed({"name": "mod:Class"})`."""

    def install(points: dict[str, str], dist: str = "widget_kinds") -> None:
        info = tmp_path / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        lines = "".join(f"{name} = {value}\n" for name, value in points.items())
        (info / "entry_points.txt").write_text(f"[opsconsole.kinds]\n{lines}")
        monkeypatch.syspath_prepend(str(tmp_path))
        registry.reset()

    yield install
    sys.path_importer_cache.clear()


def test_the_built_in_kinds_are_registered_without_any_setting():
    found = registry.registered()
    assert [type(r) for r in found] == [MemcachedReconciler, TenantReconciler, KVStoreReconciler]
    assert registry.registered()[0] is found[0]  # built once per process


def test_a_kind_named_in_settings_is_added_to_the_built_in_ones_and_a_repeated_one_counts_once(settings):
    settings.OPSCONSOLE_RECONCILERS = [f"{HERE}.WidgetReconciler", BUILTIN[0]]
    assert [type(r) for r in registry.registered()] == [MemcachedReconciler, TenantReconciler, KVStoreReconciler,
                                                        WidgetReconciler]


def test_the_built_in_kinds_can_be_turned_off(settings):
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    assert registry.registered() == []
    settings.OPSCONSOLE_RECONCILERS = [f"{HERE}.WidgetReconciler"]
    assert [type(r) for r in registry.registered()] == [WidgetReconciler]


def test_an_installed_package_registers_its_kinds_by_entry_point(installed, settings):
    installed({"widget": f"{HERE}:WidgetReconciler"})
    assert [type(r) for r in registry.registered()] == [MemcachedReconciler, TenantReconciler, KVStoreReconciler,
                                                        WidgetReconciler]
    origins = {s.path: s.origin for s in registry.sources()}
    assert origins[f"{HERE}:WidgetReconciler"] == "entry point 'widget' of widget_kinds"
    settings.OPSCONSOLE_KIND_ENTRY_POINTS = False
    assert WidgetReconciler not in [type(r) for r in registry.registered()]


def test_two_reconcilers_for_one_resource_are_refused_naming_where_each_came_from(installed, settings):
    installed({"widget": f"{HERE}:WidgetReconciler"})
    settings.OPSCONSOLE_RECONCILERS = [f"{HERE}.OtherWidgetReconciler"]
    with pytest.raises(ValueError, match="both reconcile widgets.widgets.example.com") as err:
        registry.registered()
    assert "OPSCONSOLE_RECONCILERS" in str(err.value) and "entry point 'widget'" in str(err.value)


def test_a_broken_entry_point_says_which_package_declared_it(installed):
    installed({"broken": f"{HERE}:NoSuchClass"})
    with pytest.raises(ImportError, match="entry point 'broken' of widget_kinds"):
        registry.registered()


def test_it_finds_a_reconciler_by_key_by_resource_and_by_name():
    assert isinstance(registry.for_key("cache.example.com/v1alpha1/memcacheds/default/a"), MemcachedReconciler)
    assert isinstance(registry.for_key("tenancy.example.com/v1alpha1/tenants//acme"), TenantReconciler)
    assert isinstance(registry.for_kind("tenancy.example.com", "tenants"), TenantReconciler)
    for name in ("Memcached", "memcached", "memcacheds", "memcacheds.cache.example.com"):
        assert isinstance(registry.for_name(name), MemcachedReconciler)


def test_an_unregistered_kind_is_unknown(settings):
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_RECONCILERS = BUILTIN[:1]
    with pytest.raises(registry.UnknownKind):
        registry.for_key("tenancy.example.com/v1alpha1/tenants//acme")
    with pytest.raises(registry.UnknownKind):
        registry.for_name("Tenant")


def test_a_changed_setting_is_picked_up(settings):
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    settings.OPSCONSOLE_RECONCILERS = BUILTIN[:1]
    assert len(registry.registered()) == 1
    settings.OPSCONSOLE_RECONCILERS = BUILTIN
    assert len(registry.registered()) == 2


@pytest.mark.parametrize("path, error", [
    ("nodots", ImportError),
    ("reconcilers.kinds.memcached.NoSuchClass", ImportError),
    ("reconcilers.kinds.nosuchmodule.X", ImportError),
    ("reconcilers.kinds.memcached.MACHINE", TypeError),
])
def test_a_bad_entry_says_what_is_wrong(settings, path, error):
    settings.OPSCONSOLE_RECONCILERS = [path]
    with pytest.raises(error, match="OPSCONSOLE_RECONCILERS"):
        registry.registered()
