"""The cut endpoint table (storage/objectstore/s3data.py): what it keeps, and that clients made with it
resolve the endpoints a default session resolves."""

from __future__ import annotations

import botocore.session
import pytest

from storage.objectstore import s3data


def _session(cut: bool) -> botocore.session.Session:
    session = botocore.session.Session()
    if cut:
        session.register_component("data_loader", s3data.data_loader())
    return session


def test_the_table_keeps_every_partition_and_only_the_services_an_s3_session_calls() -> None:
    full = botocore.session.Session().get_component("data_loader").load_data("endpoints")
    cut = s3data.data_loader().load_data("endpoints")
    assert [p["partition"] for p in cut["partitions"]] == [p["partition"] for p in full["partitions"]]
    for whole, kept in zip(full["partitions"], cut["partitions"], strict=True):
        assert set(kept["services"]) == set(whole["services"]) & s3data.SERVICES
        assert {k: v for k, v in kept.items() if k != "services"} == {
            k: v for k, v in whole.items() if k != "services"
        }
    assert len(full["partitions"][0]["services"]) > 100  # the cut is a real one


REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-2", "cn-north-1", "us-gov-west-1"]


@pytest.mark.parametrize("service", sorted(s3data.SERVICES))
@pytest.mark.parametrize("region", REGIONS)
def test_clients_resolve_the_same_endpoints(service: str, region: str) -> None:
    def endpoint(cut: bool) -> str:
        client = _session(cut).create_client(
            service, region_name=region, aws_access_key_id="a", aws_secret_access_key="b"
        )
        url: str = client.meta.endpoint_url
        return url

    assert endpoint(cut=True) == endpoint(cut=False)


@pytest.mark.parametrize("region", REGIONS)
def test_s3_requests_go_where_they_did(region: str) -> None:
    """A request's URL comes from the endpoint rule set, which the cut leaves alone: checked through a
    presigned GET, which resolves it without sending anything."""

    def url(cut: bool) -> str:
        client = _session(cut).create_client(
            "s3", region_name=region, aws_access_key_id="a", aws_secret_access_key="b"
        )
        signed: str = client.generate_presigned_url(
            "get_object", Params={"Bucket": "strata-bucket", "Key": "k"}, ExpiresIn=60
        )
        return signed.split("?")[0]

    assert url(cut=True) == url(cut=False)
