"""The lake's request meter (pipeline/lake/meter.py): requests go to the open scope, from any thread; one
scope at a time; requests outside a scope are not a topic's; a FileIO finds its meter by the catalog
property, and a meter gone is found no more."""

from __future__ import annotations

import gc
import threading

import pytest

from pipeline.lake.meter import METER_PROPERTY, PY_IO_IMPL, LakeMeter, ScopeBusy, meter_of
from storage.objectstore.base import GET, HEAD, PUT


def test_requests_go_to_the_open_scope_from_any_thread() -> None:
    meter = LakeMeter()
    meter.request(GET)  # before any scope: not a topic's
    with meter.scope() as scope:

        def upload() -> None:
            meter.request(PUT, 3)
            meter.wrote(1000)

        threads = [threading.Thread(target=upload) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        meter.request(HEAD)
        meter.request(GET, read=40)
        meter.deleted()
    usage = scope.usage()
    assert (usage.requests[PUT], usage.requests[HEAD], usage.requests[GET]) == (12, 1, 1)
    assert (usage.objects_written, usage.bytes_written, usage.bytes_read, usage.deletes) == (4, 4000, 40, 1)
    assert not usage.empty
    meter.request(GET)  # after it: not the scope's either
    assert scope.usage() == usage
    assert meter.unscoped().requests[GET] == 2
    with meter.scope() as quiet:
        pass
    assert quiet.usage().empty


def test_one_scope_at_a_time() -> None:
    meter = LakeMeter()
    with meter.scope(), pytest.raises(ScopeBusy), meter.scope():
        pass
    with meter.scope():  # the first one closed: a new one opens
        pass


class Catalog:
    """What ``attach`` uses of a pyiceberg catalog: its properties."""

    def __init__(self) -> None:
        self.properties = {"warehouse": "file:///w"}


def test_a_catalog_counts_through_the_first_meter_attached() -> None:
    first, second = LakeMeter(), LakeMeter()
    catalog = Catalog()
    first.attach(catalog)  # type: ignore[arg-type]
    assert catalog.properties == {"warehouse": "file:///w", **first.properties()}
    second.attach(catalog)  # type: ignore[arg-type]
    assert catalog.properties[METER_PROPERTY] == first.token


def test_a_file_io_finds_its_meter_by_the_catalog_property() -> None:
    first, second = LakeMeter(), LakeMeter()
    properties = first.properties()
    assert properties[PY_IO_IMPL] == "pipeline.lake.counting_io.CountingFileIO"
    assert meter_of(properties[METER_PROPERTY]) is first
    assert meter_of(second.properties()[METER_PROPERTY]) is second
    assert meter_of(None) is None
    token = second.properties()[METER_PROPERTY]
    del second
    gc.collect()
    assert meter_of(token) is None  # the registry holds no meter alive
