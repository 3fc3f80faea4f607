# Two entry points: `make run` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DATA_DIR ?= ./data
PORT ?= 9092
METRICS_PORT ?= 9644

.PHONY: run test install install-test lint bench soak clean

# The C sources and their shared header are prerequisites: an editable install compiles them into the source tree.
NATIVE_SOURCES := $(wildcard odradek/*/*.c odradek/*/*.h)

$(VENV)/.installed: pyproject.toml $(NATIVE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml $(NATIVE_SOURCES)
	$(PY) -m pip install --quiet -e '.[test,spark]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	$(VENV)/bin/odradek serve --data-dir $(DATA_DIR) --host 127.0.0.1 --port $(PORT) --metrics-port $(METRICS_PORT)

test: install-test
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -q

# Thousands of power cuts on the power-cut file system (tests/powercut_fs.py); not part of CI.
# SOAK_CUTS scales the cuts of `make test` (20 times, about 20 minutes here).
SOAK_CUTS ?= 20
SOAK_SEED ?= $(shell date +%s)
soak: install-test
	POWERCUT_CUTS=$(SOAK_CUTS) POWERCUT_SEED=$(SOAK_SEED) $(PY) -m pytest -q tests/test_powercut.py tests/test_powercut_fs.py

lint: install-test
	$(VENV)/bin/ruff check .

bench: install
	$(PY) bench/storage.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache odradek/*/*.so
