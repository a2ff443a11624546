"""The suite on several processes: each xdist worker's own services (tests/fixtures/parallel.py), the units of work
the scheduler hands out, and the arguments `make test` passes (scripts/test.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scripts import test as make_test
from tests.fixtures import parallel


def test_a_worker_gets_its_own_redis_database_counted_down_from_the_suites() -> None:
    assert parallel.redis_url_of_worker("redis://127.0.0.1:6379/15", 0) == "redis://127.0.0.1:6379/15"
    assert parallel.redis_url_of_worker("redis://127.0.0.1:6379/15", 2) == "redis://127.0.0.1:6379/13"
    assert parallel.redis_url_of_worker("redis://:pw@10.0.0.1:6391/1", 3) == "redis://:pw@10.0.0.1:6391/14"
    assert parallel.redis_url_of_worker("redis://127.0.0.1:6379", 1) == "redis://127.0.0.1:6379/15"


def test_only_an_xdist_worker_id_counts() -> None:
    assert [parallel.worker_index(w) for w in ("gw0", "gw12", None, "", "master", "gwx")] == [
        0, 12, None, None, None, None]


def test_a_worker_process_and_what_it_starts_use_its_own_redis_and_data_folder(tmp_path: Path) -> None:
    environ = {"PYTEST_XDIST_WORKER": "gw1", "REDIS_URL": "redis://127.0.0.1:6379/15",
               "OPSCONSOLE_DATA_DIR": str(tmp_path)}
    parallel.isolate_worker(environ)
    assert environ["REDIS_URL"] == "redis://127.0.0.1:6379/14"
    assert environ["OPSCONSOLE_DATA_DIR"] == str(tmp_path / "gw1") and (tmp_path / "gw1").is_dir()

    alone = {"REDIS_URL": "redis://127.0.0.1:6379/15", "OPSCONSOLE_DATA_DIR": str(tmp_path)}
    parallel.isolate_worker(alone)  # not under xdist: nothing changes
    assert alone == {"REDIS_URL": "redis://127.0.0.1:6379/15", "OPSCONSOLE_DATA_DIR": str(tmp_path)}


def test_this_process_runs_on_its_workers_services() -> None:
    """Under xdist (as `make test` runs the whole suite) this very process has its worker's Redis database and
    data folder; alone, the suite's."""
    from django.conf import settings

    index = parallel.worker_index(os.environ.get("PYTEST_XDIST_WORKER"))
    if index is None:
        assert not Path(settings.DATA_DIR).name.startswith("gw")
    else:
        assert Path(settings.DATA_DIR).name == f"gw{index}"
        assert settings.REDIS_URL == os.environ["REDIS_URL"]
        assert settings.REDIS_URL.rsplit("/", 1)[1] == str((15 - index) % 16)


def test_a_test_of_a_package_scoped_fixture_is_one_unit_with_its_package(request: pytest.FixtureRequest) -> None:
    """This module uses no package fixture: its unit is the module. The controller tests' package fixtures make
    their directory one unit."""
    assert parallel.work_unit(request.node) == "tests/test_parallel_suite.py"

    class Def:
        scope, baseid = "package", "tests/reconcilers/engine/controller"

    class Info:
        name2fixturedefs = {"controller_kubesim": [Def()]}

    class Item:
        _fixtureinfo = Info()
        nodeid = "tests/reconcilers/engine/controller/test_leader.py::test_x"

    assert parallel.work_unit(Item()) == "tests/reconcilers/engine/controller"  # type: ignore[arg-type]


def test_the_whole_suite_runs_on_several_processes_and_chosen_tests_on_one() -> None:
    plugin = ["-p", "tests.fixtures.parallel", "--dist", "loadgroup", "--no-loadscope-reorder"]
    assert make_test.parallel_arguments([], {}) == [*plugin, "-n", str(make_test.DEFAULT_PROCESSES)]
    assert make_test.parallel_arguments(["-x"], {"OPSCONSOLE_TEST_PROCESSES": "5"}) == [*plugin, "-n", "5"]
    assert make_test.parallel_arguments([], {"OPSCONSOLE_TEST_PROCESSES": "1"}) == plugin
    assert make_test.parallel_arguments(["tests/test_quality.py"], {}) == plugin
    assert make_test.parallel_arguments(["-n", "0"], {}) == plugin  # said by hand
    assert make_test.parallel_arguments(["-p", "no:xdist"], {}) == []


class _Item:
    """Enough of a pytest item for `long_units_first`: a node id, marks and fixture names."""

    def __init__(self, nodeid: str, *, long: bool = False, transaction: bool | None = None) -> None:
        self.nodeid, self.fixturenames, self._fixtureinfo = nodeid, [], None
        self.marks = {"long_unit": pytest.mark.long_unit.mark} if long else {}
        if transaction is not None:
            self.marks["django_db"] = pytest.mark.django_db(transaction=transaction).mark

    def get_closest_marker(self, name: str):
        return self.marks.get(name)

    def __repr__(self) -> str:
        return self.nodeid


def test_long_units_go_first_whole_and_transactional_ones_stay_after_the_others() -> None:
    items = [_Item("a.py::t1", transaction=False), _Item("b.py::t1"), _Item("c.py::t1", transaction=True),
             _Item("d.py::t1", transaction=True), _Item("d.py::t2", long=True, transaction=True),
             _Item("e.py::t1"), _Item("e.py::t2", long=True), _Item("f.py::t1", transaction=True)]
    order = [i.nodeid for i in parallel.long_units_first(items)]
    assert order == ["e.py::t1", "e.py::t2", "a.py::t1", "b.py::t1", "d.py::t1", "d.py::t2", "c.py::t1",
                     "f.py::t1"]
    plain = [_Item("x.py::t"), _Item("y.py::t")]
    assert parallel.long_units_first(plain) == plain
