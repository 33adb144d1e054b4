"""Schemathesis against a live server's /openapi.json: no 5xx, and responses as the schema declares them.

One module-scoped server (embedded backend) serves every generated case. Each operation is a pytest case per
generation mode (positive: data the schema allows; negative: data it forbids), driven by Hypothesis through
``APIOperation.as_strategy``. ``schemathesis.pytest.from_fixture`` would be the shorter route, but 4.32 reads
``Function._nodeid``, which pytest 9 no longer has.

Generated names and numbers are mostly random, so parameter dictionaries bind topic names (in paths and
bodies), group ids, partitions and fetch offsets to ones that exist half of the time; without them nearly
every case would stop at 40401 or 40402 and the produce, fetch and commit handlers would go untested.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from storage.topic_config import KNOWN_CONFIGS
from tests.fixtures.server import RunningServer, local_settings, run_server

pytestmark = pytest.mark.integration

EXISTING_TOPIC = "st-existing"
EXISTING_PARTITIONS = 3
EXISTING_GROUP = "st-group"
# A generated fetch may sit at the high watermark with max_wait_ms up to 60 s; valid waits are cut to this.
MAX_WAIT_MS = 50

# Why a schema-valid request may still be refused: the schema states shapes and bounds, the server also
# checks meaning. Each entry is the set of error codes a positive case may get for that operation.
#   40001  group ids follow the topic-name rule, stated in the path description but not as a pattern;
#          Idempotency-Key must be 1-200 printable ASCII; and a bound of 2**63-1 is published as the float
#          9.223372036854776e+18 (FastAPI's OpenAPI model), so 2**63 looks valid but is out of range.
#   40002  the topic already exists.                 40003  topic name rule, as for group ids.
#   40401  unknown topic.                            40402  unknown partition.
#   40405  unknown group (neither members nor offsets).
#   40601  the record is not UTF-8 (fetch it with encoding=base64).
#   41301  a record over max.message.bytes, more than max_records_per_request, or a body over the limit.
#   41601  offset out of range.                      40910  deleting records of a compact-only topic.
#   42206  the models are strict on purpose (api/models.py): 1.0 is a JSON Schema integer but not an int
#          here; also bad base64, lone surrogates, no key on a compacted topic, and the 2**63 bound above.
#   42207  topic configs are checked by storage/topic_config.py, not by the schema.
#   42208  a record timestamp outside the topic's message.timestamp.before/after.max.ms window around now.
#   42209  a partition count that does not grow the topic (the schema cannot know today's count).
#   40001  (ACLs) a binding Kafka refuses: a CLUSTER not named kafka-cluster, a principal without a type,
#          a name that is not UTF-8 text without NUL; a DELETE /v1/acls without any filter field.
#   40008  a SCRAM user name with ',', '=', ':' or an unprintable character; an empty salt.
#   40406  removing a SCRAM credential the user does not have.
#   40407  aborting the transaction of an unknown transactional id; 42217 one with nothing open.
#   40408  a typed produce body naming a schema id, subject or version the registry does not hold.
POSITIVE_REJECTIONS: dict[tuple[str, str], frozenset[int]] = {
    ("GET", "/v1/topics"): frozenset(),
    ("POST", "/v1/topics"): frozenset({40002, 40003, 42206, 42207}),
    ("GET", "/v1/topics/{topic}"): frozenset({40003, 40401}),
    ("POST", "/v1/topics/{topic}/compact"): frozenset({40003, 40401}),
    ("PATCH", "/v1/topics/{topic}/configs"): frozenset({40003, 40401, 42207}),
    ("POST", "/v1/topics/{topic}/partitions"): frozenset({40003, 40401, 42206, 42209}),
    ("POST", "/v1/topics/{topic}/records"): frozenset(
        {40001, 40003, 40401, 40402, 40408, 41301, 42206, 42208}
    ),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"): frozenset(
        {40001, 40003, 40401, 40402, 40601, 41601}
    ),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/offsets"): frozenset({40003, 40401, 40402}),
    ("DELETE", "/v1/topics/{topic}/partitions/{partition}/records"): frozenset(
        {40001, 40003, 40401, 40402, 40910, 41601}
    ),
    ("PUT", "/v1/groups/{group}/offsets"): frozenset({40001, 40003, 40401, 40402, 42206}),
    ("GET", "/v1/groups/{group}/offsets"): frozenset({40001}),
    # 40001 for GET /v1/groups: a prefix or cursor holding NUL, which no group id can.
    ("GET", "/v1/groups"): frozenset({40001}),
    ("GET", "/v1/groups/{group}"): frozenset({40001, 40405}),
    ("POST", "/v1/groups/{group}/offsets/reset"): frozenset({40001, 40003, 40401, 40402, 42206}),
    ("GET", "/v1/compaction/jobs"): frozenset({40003}),
    ("GET", "/v1/topics/{topic}/partitions"): frozenset({40003, 40401}),
    ("GET", "/v1/topics/{topic}/compaction"): frozenset({40003, 40401}),
    # 40001 for browse: a cursor that is not partition:offset pairs of the topic, or start=offset or
    # start=timestamp without the offset or timestamp.
    ("GET", "/v1/topics/{topic}/browse"): frozenset({40001, 40003, 40401, 40402}),
    # 40407 aborting an unknown transactional id, 42217 one with no open transaction.
    ("GET", "/v1/transactions"): frozenset(),
    ("POST", "/v1/transactions/{transactional_id}/abort"): frozenset({40407, 42217}),
    ("GET", "/v1/cluster"): frozenset(),
    ("GET", "/v1/metrics/history"): frozenset(),
    ("GET", "/v1/acls"): frozenset(),
    ("POST", "/v1/acls"): frozenset({40001, 42206}),
    ("DELETE", "/v1/acls"): frozenset({40001}),
    ("GET", "/v1/users"): frozenset(),
    ("PUT", "/v1/users/{user}/scram/{mechanism}"): frozenset({40008, 42206}),
    ("DELETE", "/v1/users/{user}/scram/{mechanism}"): frozenset({40008, 40406}),
    # 42230: commit now on a topic whose lake is disabled (the shared topic's is).
    ("GET", "/v1/lake"): frozenset(),
    ("GET", "/v1/topics/{topic}/lake"): frozenset({40003, 40401}),
    ("POST", "/v1/topics/{topic}/lake/commit-now"): frozenset({40003, 40401, 42230}),
    ("GET", "/healthz"): frozenset(),
    ("GET", "/readyz"): frozenset(),
    # Last: half of its positive cases delete the shared topic (the fixture below recreates it).
    ("DELETE", "/v1/topics/{topic}"): frozenset({40003, 40401}),
}
OPERATIONS = list(POSITIVE_REJECTIONS)
# Operations with no constrained input: Hypothesis cannot build a schema-violating request for them (a path
# parameter typed only as a string stays a string).
NOTHING_TO_NEGATE = {
    ("GET", "/v1/topics"),
    ("GET", "/v1/topics/{topic}"),
    ("POST", "/v1/topics/{topic}/compact"),
    ("GET", "/v1/groups/{group}/offsets"),
    ("GET", "/v1/groups/{group}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/v1/cluster"),
    ("DELETE", "/v1/topics/{topic}"),
    ("GET", "/v1/users"),
    ("GET", "/v1/topics/{topic}/lake"),
    ("POST", "/v1/topics/{topic}/lake/commit-now"),
}
CASES = [
    pytest.param(method, path, mode, id=f"{method} {path} {mode.value}")
    for method, path in OPERATIONS
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or (method, path) not in NOTHING_TO_NEGATE
]


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    tmp: Path = tmp_path_factory.mktemp("schemathesis")
    with run_server(local_settings(tmp)) as srv:
        yield srv


@pytest.fixture(scope="module")
def api_schema(live_server: RunningServer) -> schemathesis.BaseSchema:
    config = schemathesis.Config.from_dict(
        {
            "dictionaries": {
                "topics": {"values": [EXISTING_TOPIC]},
                "new-topics": {"values": ["st-new-a", "st-new-b", "st-new-c"]},
                "groups": {"values": [EXISTING_GROUP]},
                "partitions": {"values": list(range(EXISTING_PARTITIONS))},
                "offsets": {"values": [0, 1]},
            },
            "parameters": {
                "path.topic": {"dictionary": "topics", "probability": 0.5},
                "path.group": {"dictionary": "groups", "probability": 0.5},
                "path.partition": {"dictionary": "partitions", "probability": 0.5},
                "query.offset": {"dictionary": "offsets", "probability": 0.5},
                "query.topic": {"dictionary": "topics", "probability": 0.5},
                "body.name": {"dictionary": "new-topics", "probability": 0.5},
                "body.topic": {"dictionary": "topics", "probability": 0.5},
                "body.offsets[*].topic": {"dictionary": "topics", "probability": 0.5},
                "body.offsets[*].partition": {"dictionary": "partitions", "probability": 0.5},
                "body.records[*].partition": {"dictionary": "partitions", "probability": 0.5},
            },
            "checks": {
                # Replaced by the per-operation error-code allowlist above, which is narrower than statuses.
                "positive_data_acceptance": {"enabled": False},
            },
        }
    )
    return schemathesis.openapi.from_url(f"{live_server.url}/openapi.json", config=config)


@pytest.fixture
def existing_topic(live_server: RunningServer) -> None:
    """The shared topic exists, with default configs and a record in every partition."""
    client = live_server.client
    if client.get(f"/v1/topics/{EXISTING_TOPIC}").status_code == 404:
        live_server.create_topic(EXISTING_TOPIC, partitions=EXISTING_PARTITIONS)
        records = [{"key": f"k{p}", "value": f"v{p}", "partition": p} for p in range(EXISTING_PARTITIONS)]
        assert live_server.produce(EXISTING_TOPIC, records).status_code == 200
    reset = client.patch(
        f"/v1/topics/{EXISTING_TOPIC}/configs", json={"configs": dict.fromkeys(KNOWN_CONFIGS)}
    )
    assert reset.status_code == 200, reset.text


def test_every_operation_is_covered(api_schema: schemathesis.BaseSchema) -> None:
    declared = {(op.ok().method.upper(), op.ok().path) for op in api_schema.get_all_operations()}
    assert declared == set(OPERATIONS)


def _bound_long_poll(case: schemathesis.Case) -> None:
    wait = case.query.get("max_wait_ms") if case.query else None
    # Only valid waits are shortened, so a negative case stays negative.
    if isinstance(wait, int) and not isinstance(wait, bool) and 0 <= wait <= 60_000:
        case.query["max_wait_ms"] = min(wait, MAX_WAIT_MS)


@pytest.mark.usefixtures("existing_topic")
@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_operation_conforms(
    api_schema: schemathesis.BaseSchema, method: str, path: str, mode: GenerationMode
) -> None:
    operation = api_schema[path][method]
    allowed = POSITIVE_REJECTIONS[(method, path)]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )
    def run(case: schemathesis.Case) -> None:
        _bound_long_poll(case)
        response = case.call_and_validate()
        if response.status_code < 400:
            return
        error = response.json()
        code = error["error_code"]
        # The error contract, beyond what ErrorOut states: the status is the code's prefix, the message says
        # something, and n = 0 (a framework-level error with no Strata code) never reaches a routed request.
        assert code // 100 == response.status_code, response.text
        assert code % 100 != 0, response.text
        assert error["message"].strip(), response.text
        if mode is GenerationMode.POSITIVE:
            assert code in allowed, f"schema-valid request refused with {code}: {response.text}"

    run()
