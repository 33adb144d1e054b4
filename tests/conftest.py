"""Fixtures for every test tier live in tests/fixtures/; each starts a real server or fails loudly.

Property tests that name no example count draw Hypothesis's default 100, scaled as tests/examples.py says.
"""

from hypothesis import settings

from tests.examples import examples

settings.register_profile("strata", max_examples=examples(100))
settings.load_profile("strata")

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
