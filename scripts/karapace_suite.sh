#!/usr/bin/env bash
# Karapace's schema registry integration tests (Aiven-Open/karapace, one pinned commit) against a Strata agent.
#
#   scripts/karapace_suite.sh setup            clone Karapace and build its Python 3.12 venv, cached
#   scripts/karapace_suite.sh run [PYTEST...]  start an agent, run the tests, print a pass/fail table
#
# With no arguments, `run` takes the test files and the deselected tests from scripts/karapace_tests.txt;
# any arguments replace the files (pytest node ids or options, e.g. `tests/integration/test_jsonschema.py`).
# The table names each failure's cause from scripts/karapace_known_failures.txt, and lists the failures that
# file does not know and the known ones that passed.
# Environment:
#   KARAPACE_SUITE_DIR  cache (default .cache/karapace-suite, gitignored)
#   KARAPACE_REPO       where to clone from (default Karapace's GitHub repository; a local clone or bare
#                       mirror works too)
#   KARAPACE_AVRO       pip requirement that replaces Karapace's `avro @ <GitHub tarball of Aiven's fork>`
#                       pin (default: keep the pin), e.g. `avro==1.12.1` where GitHub is not reachable
#   KARAPACE_PYTHON     a Python 3.12 interpreter; otherwise pyenv's newest 3.12, then python3.12 on PATH
#   KARAPACE_TIMEOUT    seconds per test, fixtures included (default 120)
#   KARAPACE_AGENTS     per-test (default): every test gets a fresh agent, as Karapace's own fixture starts
#                       a fresh Karapace per test (scripts/karapace_agents.py); shared: one agent for the
#                       whole run, quicker, but tests then see each other's subjects, ids and configs
#   KARAPACE_REGISTRY_URL and KARAPACE_BOOTSTRAP
#                       an already running agent's registry URL and Kafka host:port; otherwise
#                       `strata serve --role agent` is started from this checkout
# Needs Go (Karapace's protobuf checker, protopace, is a Go shared library) and PyPI and the Go module proxy.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
SUITE_DIR=${KARAPACE_SUITE_DIR:-$ROOT/.cache/karapace-suite}
REPO=${KARAPACE_REPO:-https://github.com/Aiven-Open/karapace.git}
COMMIT=3bbc1f8d30d7b650f49b75128ba9a46fdab61a67
AVRO=${KARAPACE_AVRO:-}
TIMEOUT=${KARAPACE_TIMEOUT:-120}
AGENTS=${KARAPACE_AGENTS:-per-test}
# protopace imports buf's private packages, whose init() panics unless the main module is Buf's own; Karapace
# pins Aiven's fork of buf (v1.39.0 plus one commit deleting that init), which is on GitHub only. The same
# deletion is made here on buf v1.39.0 from the Go module proxy.
BUF_VERSION=v1.39.0
SRC=$SUITE_DIR/src
VENV=$SUITE_DIR/venv
BUF_DIR=$SUITE_DIR/buf-$BUF_VERSION-noimportcheck
# A cached venv is reused only if it was made from the same commit and the same avro requirement.
SETUP_KEY="commit=$COMMIT avro=${AVRO:-pinned} buf=$BUF_VERSION"

log() { echo "== $*" >&2; }
die() {
	echo "karapace suite: $*" >&2
	exit 1
}

find_python312() {
	local version
	if [ -n "${KARAPACE_PYTHON:-}" ]; then
		echo "$KARAPACE_PYTHON"
	elif command -v pyenv >/dev/null 2>&1 && version=$(pyenv latest 3.12 2>/dev/null) && [ -n "$version" ]; then
		echo "$(pyenv root)/versions/$version/bin/python"
	elif command -v python3.12 >/dev/null 2>&1; then
		command -v python3.12
	else
		die "no Python 3.12 (Karapace needs >=3.12): install it with pyenv, or set KARAPACE_PYTHON"
	fi
}

# The website/ folder (Karapace's docs site) is left out of the work tree: the tests do not read it, and a
# mirror that keeps only small blobs may lack one of its files.
clone() {
	if ! { [ -d "$SRC/.git" ] && git -C "$SRC" cat-file -e "$COMMIT^{commit}" 2>/dev/null; }; then
		rm -rf "$SRC"
		log "clone $REPO into $SRC"
		git clone --quiet --no-checkout "$REPO" "$SRC" ||
			die "cannot clone $REPO; set KARAPACE_REPO to a reachable URL or a local clone"
		git -C "$SRC" config core.sparseCheckout true
		printf '/*\n!/website/\n' >"$SRC/.git/info/sparse-checkout"
	fi
	# --force: drops the go.mod edit of an earlier setup (version.py, which pip writes, is ignored by git).
	git -C "$SRC" checkout --quiet --force --detach "$COMMIT"
}

patched_buf() {
	local dir
	[ -f "$BUF_DIR/go.mod" ] && return 0
	command -v go >/dev/null 2>&1 || die "no go on PATH: Karapace's protopace is built with Go"
	dir=$(go mod download -json "github.com/bufbuild/buf@$BUF_VERSION" |
		"$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
	rm -rf "$BUF_DIR.tmp"
	cp -r "$dir" "$BUF_DIR.tmp"
	chmod -R u+w "$BUF_DIR.tmp"
	sed -i '/^func init() {$/,/^}$/d' "$BUF_DIR.tmp/private/usage/usage.go"
	if grep -q '^func init()' "$BUF_DIR.tmp/private/usage/usage.go"; then
		die "buf's import check not removed from $BUF_DIR.tmp/private/usage/usage.go"
	fi
	mv "$BUF_DIR.tmp" "$BUF_DIR"
}

setup() {
	mkdir -p "$SUITE_DIR"
	exec 9>"$SUITE_DIR/.lock"
	flock 9
	if [ -x "$VENV/bin/python" ] && [ -f "$SRC/src/karapace/version.py" ] &&
		[ "$(cat "$VENV/.strata-setup-key" 2>/dev/null)" = "$SETUP_KEY" ]; then
		log "cached venv: $VENV"
		return 0
	fi
	local python312 requirements
	python312=$(find_python312)
	"$python312" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' ||
		die "$python312 is not Python 3.12"
	clone
	patched_buf
	(cd "$SRC/go/protopace" && go mod edit -replace="github.com/bufbuild/buf=$BUF_DIR")
	requirements=$SUITE_DIR/requirements-dev.txt
	if [ -n "$AVRO" ]; then
		sed "s|^avro @ .*|$AVRO|" "$SRC/requirements/requirements-dev.txt" >"$requirements"
	else
		cp "$SRC/requirements/requirements-dev.txt" "$requirements"
	fi
	rm -rf "$VENV"
	log "venv $VENV with $python312; Karapace's pinned test requirements, then Karapace (builds protopace)"
	"$python312" -m venv "$VENV"
	"$VENV/bin/python" -m pip install --quiet -r "$requirements"
	# --no-deps: the requirements above pin every dependency; this builds the Go extension and version.py.
	(cd "$SRC" && "$VENV/bin/python" -m pip install --quiet --no-deps -e .)
	"$VENV/bin/python" -c 'import karapace.core.protobuf.protopace' || die "protopace does not load"
	echo "$SETUP_KEY" >"$VENV/.strata-setup-key"
}

# Starts `strata serve --role agent` (this checkout's code, embedded backend under $1/data) with its HTTP,
# Kafka and registry listeners on free ports; sets AGENT_PID, REGISTRY_URL and BOOTSTRAP.
start_agent() {
	local http_port kafka_port registry_port
	read -r http_port kafka_port registry_port < <("$PYTHON" -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
	PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" -m strata.cli serve --role agent --data-dir "$1/data" \
		--host 127.0.0.1 --port "$http_port" --kafka-port "$kafka_port" \
		--schema-registry-port "$registry_port" >"$1/agent.log" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 1 300); do
		kill -0 "$AGENT_PID" 2>/dev/null || {
			cat "$1/agent.log" >&2
			exit 1
		}
		if (exec 3<>"/dev/tcp/127.0.0.1/$kafka_port") 2>/dev/null &&
			(exec 3<>"/dev/tcp/127.0.0.1/$registry_port") 2>/dev/null; then
			REGISTRY_URL=http://127.0.0.1:$registry_port
			BOOTSTRAP=127.0.0.1:$kafka_port
			return 0
		fi
		sleep 0.1
	done
	die "the agent did not open ports $kafka_port and $registry_port; see $1/agent.log"
}

# Lines of scripts/karapace_tests.txt: a test file, or `!<node id>` to deselect (a prefix of node ids);
# `#` starts a comment.
listed() { sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^[[:space:]]*$/d' scripts/karapace_tests.txt; }

run() {
	setup
	local work args=() line rc=0
	work=$(mktemp -d "${TMPDIR:-/tmp}/karapace-run.XXXXXX")
	AGENT_PID=""
	if [ -n "${KARAPACE_REGISTRY_URL:-}" ]; then
		REGISTRY_URL=$KARAPACE_REGISTRY_URL
		BOOTSTRAP=${KARAPACE_BOOTSTRAP:?KARAPACE_BOOTSTRAP must name the Kafka listener too}
	else
		start_agent "$work"
		trap 'kill "$AGENT_PID" 2>/dev/null || true; wait "$AGENT_PID" 2>/dev/null || true' EXIT
	fi
	if [ $# -gt 0 ]; then
		args=("$@")
	else
		while read -r line; do
			case "$line" in
			!*) args+=(--deselect "${line#!}") ;;
			*) args+=("$line") ;;
			esac
		done < <(listed)
	fi
	local plugin=() plugin_env=()
	case "$AGENTS" in
	per-test)
		[ -z "${KARAPACE_REGISTRY_URL:-}" ] || die "KARAPACE_REGISTRY_URL needs KARAPACE_AGENTS=shared"
		plugin=(-p karapace_agents)
		plugin_env=(PYTHONPATH="$ROOT/scripts" KARAPACE_STRATA_ROOT="$ROOT" KARAPACE_STRATA_WORK="$work/agents"
			KARAPACE_STRATA_PYTHON="$(command -v "$PYTHON")")
		;;
	shared) ;;
	*) die "KARAPACE_AGENTS is per-test or shared, not $AGENTS" ;;
	esac
	log "agents: $AGENTS; Kafka $BOOTSTRAP; Karapace $COMMIT; logs in $work"
	# One pytest process (Karapace's pytest.ini asks for xdist workers): with a shared agent, tests would
	# race on the global compatibility level; with an agent per test, two would start at once on 2 cores.
	# The timeout covers fixtures too (timeout_func_only off), and so a test's agent start.
	(
		cd "$SRC"
		env "${plugin_env[@]}" "$VENV/bin/python" -m pytest -p no:cacheprovider "${plugin[@]}" --numprocesses 0 --timeout "$TIMEOUT" \
			-o timeout_func_only=false --junitxml "$work/junit.xml" -q \
			--registry-url "$REGISTRY_URL" --kafka-bootstrap-servers "$BOOTSTRAP" "${args[@]}"
	) 2>&1 | tee "$work/pytest.log" | grep -E '^(FAILED|ERROR) |^=+ .* in [0-9.]+s' || true
	[ -f "$work/junit.xml" ] || die "pytest wrote no report; see $work/pytest.log"
	# Deselections are reported only for a run of the listed files; known failures for any run.
	"$PYTHON" scripts/karapace_report.py "$work/junit.xml" \
		"$([ $# -gt 0 ] && echo /dev/null || echo scripts/karapace_tests.txt)" scripts/karapace_known_failures.txt |
		tee "$work/report.md" || rc=$?
	if [ -n "$AGENT_PID" ] && ! kill -0 "$AGENT_PID" 2>/dev/null; then
		die "the agent exited during the run; see $work/agent.log"
	fi
	log "report: $work/report.md; pytest's log: $work/pytest.log"
	return "$rc"
}

case "${1:-}" in
setup) setup ;;
run)
	shift
	run "$@"
	;;
*)
	sed -n '2,20p' "$0" >&2
	exit 2
	;;
esac
