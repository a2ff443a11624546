"""The suite's root conftest: it registers the root fixture plugin (tests/fixtures), where every shared fixture
lives."""

pytest_plugins = ["tests.fixtures.services", "tests.fixtures.flush", "tests.fixtures.cluster", "tests.fixtures.engines",
                  "tests.fixtures.web"]
