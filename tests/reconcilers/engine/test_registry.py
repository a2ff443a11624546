"""The registry loads OPSCONSOLE_RECONCILERS by dotted path and finds reconcilers by key, kind and name."""

from __future__ import annotations

import pytest

from reconcilers.engine import registry
from reconcilers.kinds.memcached import MemcachedReconciler
from reconcilers.kinds.tenant import TenantReconciler

BUILTIN = ["reconcilers.kinds.memcached.MemcachedReconciler", "reconcilers.kinds.tenant.TenantReconciler"]


@pytest.fixture(autouse=True)
def fresh():
    registry.reset()
    yield
    registry.reset()


def test_it_builds_one_instance_of_each_configured_reconciler_in_order(settings):
    settings.OPSCONSOLE_RECONCILERS = BUILTIN
    found = registry.registered()
    assert [type(r) for r in found] == [MemcachedReconciler, TenantReconciler]
    assert registry.registered()[0] is found[0]  # built once per process


def test_it_finds_a_reconciler_by_key_by_resource_and_by_name(settings):
    settings.OPSCONSOLE_RECONCILERS = BUILTIN
    assert isinstance(registry.for_key("cache.example.com/v1alpha1/memcacheds/default/a"), MemcachedReconciler)
    assert isinstance(registry.for_key("tenancy.example.com/v1alpha1/tenants//acme"), TenantReconciler)
    assert isinstance(registry.for_kind("tenancy.example.com", "tenants"), TenantReconciler)
    for name in ("Memcached", "memcached", "memcacheds", "memcacheds.cache.example.com"):
        assert isinstance(registry.for_name(name), MemcachedReconciler)


def test_an_unregistered_kind_is_unknown(settings):
    settings.OPSCONSOLE_RECONCILERS = BUILTIN[:1]
    with pytest.raises(registry.UnknownKind):
        registry.for_key("tenancy.example.com/v1alpha1/tenants//acme")
    with pytest.raises(registry.UnknownKind):
        registry.for_name("Tenant")


def test_a_changed_setting_is_picked_up(settings):
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
    with pytest.raises(error):
        registry.registered()


def test_two_reconcilers_for_one_resource_are_refused(settings):
    settings.OPSCONSOLE_RECONCILERS = [BUILTIN[0], BUILTIN[0]]
    with pytest.raises(ValueError, match="both reconcile"):
        registry.registered()
