"""Fixtures for every test tier live in tests/fixtures/; each starts a real server or fails loudly."""

pytest_plugins = [
    "tests.fixtures.s3",
    "tests.fixtures.metadata",
    "tests.fixtures.server",
    "tests.fixtures.spark",
    "tests.fixtures.kafka",
    "tests.fixtures.reference_broker",
    "tests.fixtures.targets",
    "tests.fixtures.broker",
    "tests.fixtures.collector",
]
