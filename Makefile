# Every target creates or reuses its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# make demo needs ttsperf's runtime dependencies only, not the dev extras (ray, onnxruntime,
# torchao, schemathesis, ...): most of a fresh venv's install time.
DEMO_STAMP := $(VENV)/.demo-stamp
# --no-compile: pip byte-compiles every installed module one by one (all of torch's). make demo
# goes without: its few processes compile what they import. The dev venv is compiled after its
# install, on all cores (~21 s on 2): the tests start hundreds of processes, and where
# PYTHONDONTWRITEBYTECODE is set (CI here) nothing compiled on import is kept, so each one compiled
# torch again (import torch 3.2 s against 1.3 s; make test 1,105 s of pytest against ~850 s).
PIP_INSTALL = -m pip install -q --no-compile -c constraints-dev.txt
# (A few packages ship files that are not Python 3.11, templates and test data: skipped, hence || true.)
SITE_PACKAGES = $$($(PY) -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# The conformance venv holds the official ChatTTS package (AGPL; only ever run, never copied) with
# the torch/torchaudio pair it needs: ~7 GB, so it lives apart from the development venv.
CVENV ?= .venv-conformance
CPY := $(CVENV)/bin/python
CSTAMP := $(CVENV)/.installed-stamp

.PHONY: test check demo conformance lint clean

$(STAMP): pyproject.toml constraints-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) $(PIP_INSTALL) -e '.[dev]'
	$(PY) -m compileall -q -j 0 $(SITE_PACKAGES) > /dev/null || true
	touch $@

# The dev venv holds the runtime dependencies already (pip checks them in seconds), and the demo's
# venv becomes the dev one when a dev target runs.
$(DEMO_STAMP): pyproject.toml constraints-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) $(PIP_INSTALL) -e .
	touch $@

# Every test, on all cores: one test file per worker (pytest-xdist's loadfile), so a module's
# servers and models are built once; workers run torch on one thread (tests/conftest.py).
test: $(STAMP)
	sh tests/report/ensure_chromium.sh
	$(PY) -m pytest -q -n auto --dist loadfile

# The inner loop: lint, then every test not marked slow, on all cores (pytest-xdist; one file per
# worker, so a module's server or model is built once). `make test` still runs everything.
check: lint
	$(PY) -m pytest -q -m "not slow" -n auto --dist loadfile

demo: $(DEMO_STAMP)
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
