# Two entry points: `make run` and `make test`. Both set up .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DATA_DIR ?= ./data
PORT ?= 9092
METRICS_PORT ?= 9644

.PHONY: run test install install-test lint bench soak sdist-check sanitize docker-check clean

# The C sources and their shared headers are prerequisites: an editable install compiles them
# into the source tree (setup.py declares them). Each install ends with one line saying which
# C modules are active.
NATIVE_SOURCES := $(wildcard odradek/*/*.c odradek/*/*.h)
BUILD_FILES := pyproject.toml setup.py MANIFEST.in
# setuptools' notice that an editable install's package can be shadowed by a folder of the same
# name is silenced: it says nothing about this project, and buried the line that does.
EDITABLE_INSTALL := PYTHONWARNINGS=ignore:::setuptools.command.editable_wheel $(PY) -m pip install --quiet -e

$(VENV)/.installed: $(BUILD_FILES) $(NATIVE_SOURCES)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(EDITABLE_INSTALL) .
	$(VENV)/bin/odradek --version
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed $(BUILD_FILES) $(NATIVE_SOURCES)
	$(EDITABLE_INSTALL) '.[test,spark]'
	touch $@

# The spark extra, unless it is there already (install-test has it): reinstalling would
# rebuild the C modules in place under whatever runs from .venv.
$(VENV)/.installed-spark: $(VENV)/.installed $(BUILD_FILES)
	$(PY) -c "import pyspark, pyarrow" 2>/dev/null || $(EDITABLE_INSTALL) '.[spark]'
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

run: install
	$(VENV)/bin/odradek serve --data-dir $(DATA_DIR) --host 127.0.0.1 --port $(PORT) --metrics-port $(METRICS_PORT)

# The Spark example (examples/README.md) from a fresh clone: installs the spark extra, starts
# a broker of its own, sends clicks, counts them with Spark, checks the counts (Java 17).
# SPARK_EXAMPLE_ARGS="--bootstrap 127.0.0.1:9092" runs it against `make run`'s broker instead.
SPARK_EXAMPLE_ARGS ?=
.PHONY: spark-example
spark-example: $(VENV)/.installed-spark
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) examples/spark_example.py $(SPARK_EXAMPLE_ARGS)

# Every test worker imports the whole suite, and many tests start `odradek` in a child process:
# with bytecode caching off (PYTHONDONTWRITEBYTECODE, as in many containers) each of them compiles
# every module again, and pytest rewrites every test module's asserts again, on every run.
unexport PYTHONDONTWRITEBYTECODE

# Most of the suite waits on processes and sockets, so it runs on more workers than cores; tests
# sharing a module's or session's fixture stay on one worker (tests/conftest.py). TEST_WORKERS=0
# runs it in one process.
TEST_WORKERS ?= 4
PYTEST := $(PY) -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

test: install-test
	PYSPARK_PYTHON=$(abspath $(PY)) $(PYTEST)

# The edit-and-check loop: no slow, Spark or Prometheus tests, Hypothesis's dev budgets (a
# quarter of CI's, tests/conftest.py) and half CI's power cuts (tests/test_powercut.py); under
# 90 s on 2 quiet cores.
.PHONY: test-fast
test-fast: install-test
	$(PYTEST) -m "not slow and not spark and not prometheus"

# Thousands of power cuts on the power-cut file system (tests/powercut_fs.py), and many programs
# of the differential model against Apache Kafka (tests/test_kafka_reference_model.py); not part
# of CI. SOAK_CUTS scales the cuts of `make test` (20 times, about 20 minutes here);
# MODEL_PROGRAMS programs of MODEL_STEPS steps (about 15 s a program here) from SOAK_SEED on,
# each failure naming its seed (MODEL_SEED=<seed> replays it).
SOAK_CUTS ?= 20
SOAK_SEED ?= $(shell date +%s)
MODEL_PROGRAMS ?= 200
MODEL_STEPS ?= 20
soak: install-test
	POWERCUT_CUTS=$(SOAK_CUTS) POWERCUT_SEED=$(SOAK_SEED) $(PY) -m pytest -q tests/test_powercut.py tests/test_powercut_producers.py tests/test_powercut_groups.py tests/test_powercut_fs.py
	MODEL_PROGRAMS=$(MODEL_PROGRAMS) MODEL_STEPS=$(MODEL_STEPS) MODEL_FIRST_SEED=$(SOAK_SEED) $(PY) -m pytest -q tests/test_kafka_reference_model.py -k generated_programs

lint: install-test
	$(VENV)/bin/ruff check .

bench: install
	$(PY) bench/storage.py

# An sdist, a wheel built from it in a clean venv, and every C module importing from it.
sdist-check: install-test
	.ci/sdist-check

# The C modules built with AddressSanitizer and UndefinedBehaviorSanitizer, running the tests
# that compare them with their Python twins.
sanitize: install-test
	.ci/sanitize

# The Docker image and docker-compose.yml built and run end to end (.ci/docker-check): when no
# engine answers it installs Debian's docker.io and starts dockerd (root), and without a registry
# it makes a base image with debootstrap (cached). Outside CI it skips, saying why, when no engine
# can be had. Under 10 minutes with nothing cached.
docker-check: install-test
	$(PY) .ci/docker-check

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache odradek/*/*.so
