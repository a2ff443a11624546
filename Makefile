# The README's two commands: `make run` (the product on its embedded default) and `make test` (the suite).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: run test lint install clean generate

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip setuptools wheel
	$(VENV)/bin/pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/python scripts/run.py

test: $(STAMP)
	$(VENV)/bin/python scripts/test.py $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# What the registered kinds generate (CRDs, the ClusterRole, the webhook configurations, the SLO rules), written
# where the repository keeps it (the Helm chart links to these files); tests fail while one is stale.
generate: $(STAMP)
	$(VENV)/bin/python manage.py crds --write deploy/crds
	$(VENV)/bin/python manage.py rbac > deploy/kustomize/base/rbac.yaml
	$(VENV)/bin/python manage.py webhooks > deploy/webhooks/configurations.yaml
	$(VENV)/bin/python manage.py slo_rules > deploy/prometheus/slo.yml

clean:
	rm -rf $(VENV) data staticfiles
