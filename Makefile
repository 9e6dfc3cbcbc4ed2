# Every target creates or reuses its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The conformance venv holds the official ChatTTS package (AGPL; only ever run, never copied) with
# the torch/torchaudio pair it needs: ~7 GB, so it lives apart from the development venv.
CVENV ?= .venv-conformance
CPY := $(CVENV)/bin/python
CSTAMP := $(CVENV)/.installed-stamp

.PHONY: test check demo conformance lint clean

$(STAMP): pyproject.toml constraints-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints-dev.txt -e '.[dev]'
	touch $@

test: $(STAMP)
	sh tests/report/ensure_chromium.sh
	$(PY) -m pytest -q

# The inner loop: lint, then every test not marked slow, on all cores (pytest-xdist; one file per
# worker, so a module's server or model is built once). `make test` still runs everything.
check: lint
	$(PY) -m pytest -q -m "not slow" -n auto --dist loadfile

demo: $(STAMP)
	$(VENV)/bin/ttsperf demo --quick

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	PYTHONPATH=src $(VENV)/bin/lint-imports --no-cache --no-logo  # the layers: pyproject.toml

$(CSTAMP): conformance/requirements.txt
	$(PYTHON) -m venv $(CVENV)
	$(CPY) -m pip install -q --upgrade pip
	$(CPY) -m pip install -q -r conformance/requirements.txt
	touch $@

conformance: $(CSTAMP)
	PYTHONPATH=src $(CPY) conformance/run.py

clean:
	rm -rf $(VENV) $(CVENV) build dist src/*.egg-info
