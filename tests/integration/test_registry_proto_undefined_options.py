"""A Protobuf schema with custom options that no import defines, through confluent-kafka's
``SchemaRegistryClient`` against a running agent (registry/formats/protobuf_undefined.py): registered, one
id for one schema however it is spelled, read back as registered, and served without them as a descriptor.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from google.protobuf import descriptor_pb2, descriptor_pool

pytestmark = pytest.mark.integration

CUSTOMER = 'syntax = "proto3";\npackage a1;\nmessage Customer {\n  string name = 1;\n}\n'
# Karapace's test_protobuf_schema_references registers a oneof option like this one.
TEST_MESSAGE = """syntax = "proto3";
package a1;
import "Customer.proto";
option (file_opt) = "f";
message TestMessage {
  Customer customer = 1 [(field_opt) = 3];
  oneof page_info {
    option (my_option) = true;
    int32 page_number = 3;
    int32 result_per_page = 4;
  }
}
"""


def serialized(url: str, schema_id: int) -> descriptor_pb2.FileDescriptorProto:
    answer = httpx.get(f"{url}/schemas/ids/{schema_id}", params={"format": "serialized"})
    answer.raise_for_status()
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(answer.json()["schema"]))


def test_undefined_options_through_the_client(server_factory: Callable[..., Any]) -> None:
    with (
        server_factory() as srv,
        SchemaRegistryClient({"url": srv.registry_url, "max.retries": 0}) as client,
    ):
        customer_id = client.register_schema("customer", Schema(CUSTOMER, "PROTOBUF"))
        refs = [SchemaReference("Customer.proto", "customer", 1)]
        schema_id = client.register_schema("test_schema", Schema(TEST_MESSAGE, "PROTOBUF", refs))
        assert client.get_schema(schema_id).schema_str == TEST_MESSAGE

        # The same schema spelled otherwise is the same schema; another value is another one.
        respelled = TEST_MESSAGE.replace("(my_option) = true", "( my_option )=true")
        assert client.register_schema("same", Schema(respelled, "PROTOBUF", refs)) == schema_id
        assert client.lookup_schema("test_schema", Schema(respelled, "PROTOBUF", refs)).version == 1
        other = TEST_MESSAGE.replace("(my_option) = true", "(my_option) = false")
        assert client.register_schema("other", Schema(other, "PROTOBUF", refs)) != schema_id
        # Options are not compared: the other value is a compatible next version.
        assert client.test_compatibility("test_schema", Schema(other, "PROTOBUF", refs))

        served = serialized(srv.registry_url, schema_id)
        message = served.message_type[0]
        assert served.options.ByteSize() == 0
        assert message.field[0].options.ByteSize() == 0
        assert message.oneof_decl[0].options.ByteSize() == 0
        # What a deserializer builds from it: the descriptor after its reference's.
        pool = descriptor_pool.DescriptorPool()
        dependency = serialized(srv.registry_url, customer_id)
        dependency.name = "Customer.proto"
        pool.Add(dependency)
        pool.Add(served)
        assert pool.FindMessageTypeByName("a1.TestMessage").oneofs[0].name == "page_info"
