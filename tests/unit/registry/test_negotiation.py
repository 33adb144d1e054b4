"""Content negotiation: the cases Karapace's ``test_http_headers`` pins down, and Confluent's body types."""

from __future__ import annotations

import pytest

from api.registry.negotiation import NotAcceptable, UnsupportedMediaType, answer_type, check_body_type

V1 = "application/vnd.schemaregistry.v1+json"


@pytest.mark.parametrize(
    ("accept", "answer"),
    [
        (None, V1),
        ("", V1),
        ("application/json", "application/json"),
        ("text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2", V1),
        (
            "application/vnd.schemaregistry.v2+json; q=0.1, application/vnd.schemaregistry+json; q=0.9",
            "application/vnd.schemaregistry+json",
        ),
        ("application/*", V1),
        ("*/does_not_matter", V1),
        ("*", V1),
        ("*/*", V1),
        ("application/json; q=0.5, application/vnd.schemaregistry.v1+json", V1),
    ],
)
def test_the_answer_type_follows_accept(accept: str | None, answer: str) -> None:
    assert answer_type(accept) == answer


@pytest.mark.parametrize(
    "accept", ["application/vnd.schemaregistry.v2+json", "text/*", "application/octet-stream", "text/html"]
)
def test_an_accept_nothing_satisfies_is_406(accept: str) -> None:
    with pytest.raises(NotAcceptable):
        answer_type(accept)


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "application/json",
        "application/vnd.schemaregistry.v1+json; charset=utf-8",
        "application/vnd.schemaregistry+json",
        "application/octet-stream",
        "Application/JSON",
    ],
)
def test_bodies_the_registry_reads(content_type: str | None) -> None:
    check_body_type("POST", content_type)
    check_body_type("PUT", content_type)


def test_other_bodies_are_415_on_writes_only() -> None:
    with pytest.raises(UnsupportedMediaType):
        check_body_type("PUT", "text/html")
    with pytest.raises(UnsupportedMediaType):
        check_body_type("POST", "application/x-www-form-urlencoded")
    check_body_type("GET", "text/html")
    check_body_type("DELETE", "text/html")
