#!/usr/bin/env bash
# librdkafka's own test suite (Debian bookworm's 2.0.2 source package) against a Strata agent.
#
#   scripts/librdkafka_suite.sh build            fetch + build once, cached under $RDK_SUITE_DIR
#   scripts/librdkafka_suite.sh run [ID...]      start an agent, run each test id, print a PASS/FAIL/SKIP table
#
# With no ids, `run` takes them from scripts/librdkafka_tests.txt (Tansu's tests.allow plus extras).
# Environment:
#   RDK_SUITE_DIR   build cache (default .cache/librdkafka-suite, gitignored)
#   RDK_TAGS_FIX=1  apply upstream PR #4278 (ApiVersions v3 tagged fields are skipped one byte short);
#                   0 builds the tree exactly as Debian ships it, into a separate directory
#   RDK_TIMEOUT     seconds per test id (default 300)
#   RDK_QUICK=1     quick mode (-Q); the default is full mode, because -Q on 2.0.2 returns from most
#                   SUB_TEST()s at once and so passes tests that ran nothing
#   RDK_BOOTSTRAP   host:port of an already running agent; otherwise `strata serve --role agent` is started
# Needs root for apt-get (source packages and build dependencies); both steps are skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
SUITE_DIR=${RDK_SUITE_DIR:-$ROOT/.cache/librdkafka-suite}
TAGS_FIX=${RDK_TAGS_FIX:-1}
TIMEOUT=${RDK_TIMEOUT:-300}
VARIANT=debian$([ "$TAGS_FIX" = 1 ] && echo "+tagsfix" || true)
TREE=$SUITE_DIR/$VARIANT
# rapidjson-dev: without it the tests build skips 0110 (and other JSON-stats checks).
BUILD_DEPS=(zlib1g-dev liblz4-dev libzstd-dev rapidjson-dev dpkg-dev)
CONFIGURE=(--disable-ssl --disable-gssapi --disable-sasl --disable-curl)
# A cached build is reused only if it was made with the same dependencies, flags and patch.
BUILD_KEY="deps=${BUILD_DEPS[*]} configure=${CONFIGURE[*]} tagsfix=$TAGS_FIX"

log() { echo "== $*" >&2; }

have_deps() {
	local p
	for p in "${BUILD_DEPS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || return 1
	done
}

# Source packages: add deb-src to the machine's own Debian entry (no mirror address is written here).
enable_deb_src() {
	local f
	if grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ || grep -qs '^deb-src' /etc/apt/sources.list; then
		return 0
	fi
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && grep -q 'debian' "$f" && sed -i 's/^Types: deb$/Types: deb deb-src/' "$f"
	done
	if [ -f /etc/apt/sources.list ]; then
		sed -i -E 's/^deb (https?:\/\/[^ ]*debian[^ ]*) (.*)$/deb \1 \2\ndeb-src \1 \2/' /etc/apt/sources.list
	fi
	apt-get update -qq
}

fetch_source() {
	local dl=$SUITE_DIR/download
	if compgen -G "$dl/librdkafka-*/tests/Makefile" >/dev/null; then
		return 0
	fi
	enable_deb_src
	mkdir -p "$dl"
	log "apt-get source librdkafka into $dl"
	(cd "$dl" && apt-get source --download-only librdkafka && dpkg-source -x librdkafka_*.dsc)
}

# Upstream PR #4278: rd_kafka_buf_skip_tags() skipped taglen-1 bytes of each tagged field instead of
# taglen, so any flexible response carrying a non-empty tagged field misparses (read underflow).
apply_tags_fix() {
	local h=$1/src/rdkafka_buf.h
	grep -q 'if (_taglen > 1)' "$h" || {
		echo "tags fix: pattern not found in $h" >&2
		exit 1
	}
	# In 2.0.2 the skip spans two lines: "rd_kafka_buf_skip(rkbuf," then "(size_t)(_taglen - 1));".
	sed -i -e 's/if (_taglen > 1)/if (_taglen > 0)/' -e 's/(size_t)(_taglen - 1));/(size_t)(_taglen));/' "$h"
	grep -q '(size_t)(_taglen));' "$h" || {
		echo "tags fix: skip length not patched in $h" >&2
		exit 1
	}
}

build() {
	mkdir -p "$SUITE_DIR"
	exec 9>"$SUITE_DIR/.lock"
	flock 9
	if [ -x "$TREE/tests/test-runner" ] && [ "$(cat "$TREE/.strata-build-key" 2>/dev/null)" = "$BUILD_KEY" ]; then
		log "cached build: $TREE"
		return 0
	fi
	rm -rf "$TREE"
	have_deps || {
		apt-get update -qq
		apt-get install -y -qq "${BUILD_DEPS[@]}"
	}
	fetch_source
	local src
	src=$(compgen -G "$SUITE_DIR/download/librdkafka-*/" | head -n1)
	rm -rf "$TREE.tmp"
	cp -a "$src" "$TREE.tmp"
	[ "$TAGS_FIX" = 1 ] && apply_tags_fix "$TREE.tmp"
	log "building $VARIANT (configure, libs, tests)"
	(
		cd "$TREE.tmp"
		# Not configure.*: mklove loads every configure.<name> as a module. `&&`, as `||` below disables -e.
		./configure "${CONFIGURE[@]}" >build.log 2>&1 &&
			make -j2 libs >>build.log 2>&1 &&
			make -j2 -C tests build >>build.log 2>&1
	) || {
		tail -n 40 "$TREE.tmp/build.log" >&2
		exit 1
	}
	echo "$BUILD_KEY" >"$TREE.tmp/.strata-build-key"
	mv "$TREE.tmp" "$TREE"
}

# Starts `strata serve --role agent` (this checkout's code, embedded backend under $1/data) with its Kafka
# listener on a free port, and sets AGENT_PID and BOOTSTRAP.
# Auto-created topics get 4 partitions: the suite's "default" scenario (tests/scenarios/default.json)
# configures its brokers so, and tests such as 0012 produce to partitions 1..3 of auto-created topics.
start_agent() {
	local http_port kafka_port
	read -r http_port kafka_port < <("$PYTHON" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
	PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} "$PYTHON" -m strata.cli serve --role agent --data-dir "$1/data" \
		--host 127.0.0.1 --port "$http_port" --kafka-port "$kafka_port" --schema-registry-port -1 \
		--num-partitions 4 >"$1/agent.log" 2>&1 &
	AGENT_PID=$!
	for _ in $(seq 1 300); do
		kill -0 "$AGENT_PID" 2>/dev/null || {
			cat "$1/agent.log" >&2
			exit 1
		}
		if (exec 3<>"/dev/tcp/127.0.0.1/$kafka_port") 2>/dev/null; then
			BOOTSTRAP=127.0.0.1:$kafka_port
			return 0
		fi
		sleep 0.1
	done
	echo "the agent's Kafka listener did not open 127.0.0.1:$kafka_port; see $1/agent.log" >&2
	exit 1
}

# One test id per line; `#` starts a comment.
default_ids() { sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/librdkafka_tests.txt | awk '{print $1}'; }

run() {
	build
	local ids=("$@") work
	[ ${#ids[@]} -gt 0 ] || mapfile -t ids < <(default_ids)
	work=$(mktemp -d "${TMPDIR:-/tmp}/rdk-run.XXXXXX")
	AGENT_PID=""
	if [ -n "${RDK_BOOTSTRAP:-}" ]; then
		BOOTSTRAP=$RDK_BOOTSTRAP
	else
		start_agent "$work"
		trap 'kill "$AGENT_PID" 2>/dev/null || true; wait "$AGENT_PID" 2>/dev/null || true' EXIT
	fi
	log "agent $BOOTSTRAP, logs in $work, variant $VARIANT, mode $([ "${RDK_QUICK:-0}" = 1 ] && echo quick || echo full)"
	echo "bootstrap.servers=$BOOTSTRAP" >"$work/test.conf"
	local flags=(-p1 -E) id rc result pass=0 fail=0 skip=0 start secs
	[ "${RDK_QUICK:-0}" = 1 ] && flags+=(-Q)
	printf '%-6s %-6s %6s  %s\n' id result secs tests
	for id in "${ids[@]}"; do
		start=$(date +%s)
		rc=0
		(
			cd "$TREE/tests"
			TESTS=$id RDKAFKA_TEST_CONF=$work/test.conf LD_LIBRARY_PATH=../src:../src-cpp \
				timeout "$TIMEOUT" ./test-runner "${flags[@]}"
		) >"$work/$id.log" 2>&1 || rc=$?
		secs=$(($(date +%s) - start))
		# The runner's summary table (colour codes stripped): one "| <name> | <STATE> | <secs> |" row per test
		# it ran under this id. No row, or only SKIPPED rows: not in 2.0.2, or filtered out (-E: sockem).
		# A failing runner lists every other test as DNS (did not start): keep this id's rows only.
		local names reason
		names=$(sed -e 's/\x1b\[[0-9;]*m//g' -e 's/\x1b(B//g' "$work/$id.log" |
			grep -aoE "^\| ${id}_[A-Za-z0-9_]+ +\| +[A-Z]+ " | awk '{print $2":"$4}' | sort -u | tr '\n' ' ' || true)
		# The first failure's message: the line after "### Test ... failed at ...: ###".
		reason=$(sed -e 's/\x1b\[[0-9;]*m//g' "$work/$id.log" | grep -a -m1 -A1 '^### Test' | tail -n1 | cut -c1-160 || true)
		[ "$rc" = 124 ] && reason="timeout after ${TIMEOUT}s; $reason"
		# A failed test ends in abort() (134) after its message; a crash of the client leaves none.
		[ -z "$reason" ] && [ "$rc" -gt 128 ] && reason="test-runner died on signal $((rc - 128)) ($(kill -l $((rc - 128))))"
		if [ "$rc" = 0 ] && ! grep -q ':PASSED' <<<"$names"; then
			result=SKIP
			skip=$((skip + 1))
		elif [ "$rc" = 0 ]; then
			result=PASS
			pass=$((pass + 1))
		else
			result=FAIL
			fail=$((fail + 1))
		fi
		printf '%-6s %-6s %6s  %s\n' "$id" "$result" "$secs" "$names${reason:+| $reason}"
		if [ -n "$AGENT_PID" ] && ! kill -0 "$AGENT_PID" 2>/dev/null; then
			echo "the agent exited during $id; see $work/agent.log" >&2
			exit 1
		fi
	done
	echo "passed $pass, failed $fail, skipped $skip of ${#ids[@]} (logs: $work)"
}

case "${1:-}" in
build) build ;;
run)
	shift
	run "$@"
	;;
*)
	sed -n '2,18p' "$0" >&2
	exit 2
	;;
esac
