"""DescribeAcls (key 29), CreateAcls (key 30) and DeleteAcls (key 31): Kafka's ACL admin APIs over the ACLs
in the metadata store (storage/acl_model.py, agents/acl.py).

As Kafka's: describing needs DESCRIBE on the cluster and changing needs ALTER on it (else
CLUSTER_AUTHORIZATION_FAILED, for the whole answer or each creation and filter); a binding or filter Kafka
would refuse (an UNKNOWN or ANY where a value is needed, an empty name, a principal without a type) is
INVALID_REQUEST for that creation or filter only; creating a binding that exists succeeds; a filter that
matches nothing succeeds with no matches. Changes are read from and written to the store itself, then this
agent reloads its ACLs at once, so the client's next request is checked against them; other agents see
them within their refresh interval (agents/security.py).

Strata's SUBJECT bindings (the schema registry's) are not Kafka's: this door neither shows, creates nor
deletes them, and the number that names them is an unknown resource type here, as any type Kafka lacks.
"""

from __future__ import annotations

import asyncio
from itertools import groupby
from typing import Any

from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

from agents.permissions import CLUSTER, KAFKA, ApiKey
from broker import errors
from broker.context import BrokerContext
from storage.acl_model import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    coerce,
    kafka_resource,
    validate_binding,
)
from storage.errors import BadRequest, StrataError

_DESCRIBE = KAFKA[ApiKey.DESCRIBE_ACLS].need(CLUSTER)
_CREATE = KAFKA[ApiKey.CREATE_ACLS].need(CLUSTER)
_DELETE = KAFKA[ApiKey.DELETE_ACLS].need(CLUSTER)
_Resource = DescribeAclsResponse.DescribeAclsResource
_Description = _Resource.AclDescription
_Created = CreateAclsResponse.AclCreationResult
_FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = _FilterResult.DeleteAclsMatchingAcl
_DENIED = "not allowed to manage ACLs: needs ALTER on the cluster"


def _filter(f: Any) -> AclFilter:
    """A request's filter (DescribeAcls, or one of DeleteAcls'); BadRequest for an unknown field."""
    return AclFilter(
        resource_type=kafka_resource(f.resource_type_filter),
        resource_name=f.resource_name_filter,
        pattern_type=coerce(PatternType, f.pattern_type_filter),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=coerce(Operation, f.operation),
        permission=coerce(Permission, f.permission_type),
        kafka=True,
    ).check()


async def handle_describe_acls(ctx: BrokerContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    code, message, resources = errors.NONE, None, []
    if not ctx.may(_DESCRIBE):
        code, message = errors.CLUSTER_AUTHORIZATION_FAILED, "not allowed to describe ACLs"
    else:
        try:
            wanted = _filter(req)
            rows = await asyncio.to_thread(ctx.metadata.load_security)
            resources = _by_resource([b for b in rows.acls if wanted.matches(b)])
        except StrataError as exc:
            code, message = errors.kafka_error(exc), exc.message
    return DescribeAclsResponse[req.API_VERSION](
        throttle_time_ms=0, error_code=code, error_message=message, resources=resources
    )


def _by_resource(bindings: list[AclBinding]) -> list[Any]:
    """Bindings grouped by resource pattern, as DescribeAcls answers them."""
    key = lambda b: (b.resource_type, b.resource_name, b.pattern_type)  # noqa: E731
    return [
        _Resource(
            resource_type=int(resource_type),
            resource_name=name,
            pattern_type=int(pattern),
            acls=[
                _Description(
                    principal=b.principal,
                    host=b.host,
                    operation=int(b.operation),
                    permission_type=int(b.permission),
                )
                for b in group
            ],
        )
        for (resource_type, name, pattern), group in groupby(sorted(bindings, key=key), key=key)
    ]


async def handle_create_acls(ctx: BrokerContext, req: CreateAclsRequest) -> CreateAclsResponse:
    version = req.API_VERSION
    if not ctx.may(_CREATE):
        results = [_Created(error_code=errors.CLUSTER_AUTHORIZATION_FAILED, error_message=_DENIED)] * len(
            req.creations
        )
        return CreateAclsResponse[version](throttle_time_ms=0, results=results)
    outcome: list[tuple[int, str | None]] = []
    valid: list[AclBinding] = []
    for c in req.creations:
        try:
            valid.append(
                validate_binding(
                    AclBinding(
                        resource_type=kafka_resource(c.resource_type),
                        resource_name=c.resource_name or "",
                        pattern_type=coerce(PatternType, c.resource_pattern_type),
                        principal=c.principal or "",
                        host=c.host or "",
                        operation=coerce(Operation, c.operation),
                        permission=coerce(Permission, c.permission_type),
                    )
                )
            )
            outcome.append((errors.NONE, None))
        except BadRequest as exc:
            outcome.append((errors.INVALID_REQUEST, exc.message))
    try:
        if valid:
            await asyncio.to_thread(ctx.metadata.create_acls, valid)
            await _reload(ctx)
    except StrataError as exc:
        failed = (errors.kafka_error(exc), exc.message)
        outcome = [failed if code == errors.NONE else (code, message) for code, message in outcome]
    results = [_Created(error_code=code, error_message=message) for code, message in outcome]
    return CreateAclsResponse[version](throttle_time_ms=0, results=results)


async def handle_delete_acls(ctx: BrokerContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    version = req.API_VERSION
    if not ctx.may(_DELETE):
        results = [
            _FilterResult(
                error_code=errors.CLUSTER_AUTHORIZATION_FAILED, error_message=_DENIED, matching_acls=[]
            )
        ] * len(req.filters)
        return DeleteAclsResponse[version](throttle_time_ms=0, filter_results=results)
    parsed: list[AclFilter | BadRequest] = []
    for f in req.filters:
        try:
            parsed.append(_filter(f))
        except BadRequest as exc:
            parsed.append(exc)
    valid = [f for f in parsed if isinstance(f, AclFilter)]
    failed: StrataError | None = None
    deleted: list[list[AclBinding]] = []
    try:
        if valid:
            deleted = await asyncio.to_thread(ctx.metadata.delete_acls, valid)
            await _reload(ctx)
    except StrataError as exc:
        failed = exc.with_traceback(None)  # a traceback kept in a local makes a cycle with the frame
    matches = iter(deleted)
    results = []
    for f in parsed:
        problem = f if isinstance(f, BadRequest) else failed
        if problem is not None:
            code = errors.INVALID_REQUEST if isinstance(problem, BadRequest) else errors.kafka_error(problem)
            results.append(_FilterResult(error_code=code, error_message=problem.message, matching_acls=[]))
            continue
        results.append(
            _FilterResult(
                error_code=errors.NONE,
                error_message=None,
                matching_acls=[_matching(b) for b in next(matches)],
            )
        )
    return DeleteAclsResponse[version](throttle_time_ms=0, filter_results=results)


def _matching(b: AclBinding) -> Any:
    return _Matching(
        error_code=errors.NONE,
        error_message=None,
        resource_type=int(b.resource_type),
        resource_name=b.resource_name,
        pattern_type=int(b.pattern_type),
        principal=b.principal,
        host=b.host,
        operation=int(b.operation),
        permission_type=int(b.permission),
    )


async def _reload(ctx: BrokerContext) -> None:
    """This agent's ACLs now, not at its next refresh: the client's next request sees its change."""
    if ctx.security is not None:
        await asyncio.to_thread(ctx.security.refresh)
