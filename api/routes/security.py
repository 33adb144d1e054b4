"""ACLs and SCRAM users over HTTP: the same stored ACLs and credentials as Kafka's DescribeAcls, CreateAcls,
DeleteAcls, DescribeUserScramCredentials and AlterUserScramCredentials (broker/handlers/acls.py,
scram.py), with the same rules and permissions (DESCRIBE on the cluster to list, ALTER to change).

Reads go to the metadata store itself, not this agent's copy; after a change this agent reloads at once,
the others within their refresh interval (agents/security.py).
"""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from agents import scram_users
from agents.permissions import CLUSTER, route
from agents.scram import salted_password
from api import authz
from api import security_models as sm
from api.routes.common import ERRORS, CtxDep
from storage.acl_model import AclFilter, Operation, PatternType, Permission, ResourceType, validate_binding
from storage.errors import BadRequest, InvalidPayload

router = APIRouter()
_LIST = route("GET", "/v1/acls").need(CLUSTER)
_CREATE = route("POST", "/v1/acls").need(CLUSTER)
_DELETE = route("DELETE", "/v1/acls").need(CLUSTER)
_USER = "/v1/users/{user}/scram/{mechanism}"
_USERS = route("GET", "/v1/users").need(CLUSTER)
_PUT_USER = route("PUT", _USER).need(CLUSTER)
_DELETE_USER = route("DELETE", _USER).need(CLUSTER)
_SALT_BYTES = 32


def _filter(
    resource_type: sm.ResourceFilter,
    resource_name: str | None,
    pattern_type: sm.PatternFilter,
    principal: str | None,
    host: str | None,
    operation: sm.OperationFilter,
    permission: sm.PermissionFilter,
) -> AclFilter:
    return AclFilter(
        ResourceType[resource_type],
        resource_name,
        PatternType[pattern_type],
        principal,
        host,
        Operation[operation],
        Permission[permission],
    )


@router.get("/v1/acls", response_model=sm.AclListOut, responses=ERRORS)
async def list_acls(
    http: Request,
    ctx: CtxDep,
    resource_type: sm.ResourceFilter = "ANY",
    resource_name: Annotated[str | None, Query(max_length=1000)] = None,
    pattern_type: Annotated[sm.PatternFilter, Query(description="MATCH: every ACL that applies")] = "ANY",
    principal: Annotated[str | None, Query(max_length=1000)] = None,
    host: Annotated[str | None, Query(max_length=255)] = None,
    operation: sm.OperationFilter = "ANY",
    permission: sm.PermissionFilter = "ANY",
) -> sm.AclListOut:
    """The ACLs matching the filter (Kafka's DescribeAcls; an absent field matches anything)."""
    authz.check(http, _LIST)
    wanted = _filter(resource_type, resource_name, pattern_type, principal, host, operation, permission)
    rows = await asyncio.to_thread(ctx.metadata.load_security)
    return sm.AclListOut(acls=[sm.acl_out(b) for b in rows.acls if wanted.matches(b)])


@router.post("/v1/acls", status_code=201, response_model=sm.AclsCreatedOut, responses=ERRORS)
async def create_acls(http: Request, ctx: CtxDep, body: sm.AclsIn) -> sm.AclsCreatedOut:
    """Store the ACLs, all or none (40001 names the first Kafka would refuse); those stored already stay."""
    authz.check(http, _CREATE)
    bindings = [validate_binding(a.binding()) for a in body.acls]
    created = await asyncio.to_thread(ctx.metadata.create_acls, bindings)
    await _reload(ctx)
    return sm.AclsCreatedOut(acls=[sm.acl_out(b) for b in bindings], created=created)


@router.delete("/v1/acls", response_model=sm.AclsDeletedOut, responses=ERRORS)
async def delete_acls(
    http: Request,
    ctx: CtxDep,
    resource_type: sm.ResourceFilter = "ANY",
    resource_name: Annotated[str | None, Query(max_length=1000)] = None,
    pattern_type: sm.PatternFilter = "ANY",
    principal: Annotated[str | None, Query(max_length=1000)] = None,
    host: Annotated[str | None, Query(max_length=255)] = None,
    operation: sm.OperationFilter = "ANY",
    permission: sm.PermissionFilter = "ANY",
) -> sm.AclsDeletedOut:
    """Delete the ACLs matching the filter (Kafka's DeleteAcls). A filter that matches everything must be
    asked for with at least one explicit field (``resource_type=ANY``): a bare DELETE is refused (40001)."""
    authz.check(http, _DELETE)
    if not http.query_params:
        raise BadRequest("name at least one filter field (resource_type=ANY deletes every ACL)")
    wanted = _filter(resource_type, resource_name, pattern_type, principal, host, operation, permission)
    (deleted,) = await asyncio.to_thread(ctx.metadata.delete_acls, [wanted])
    await _reload(ctx)
    return sm.AclsDeletedOut(deleted=[sm.acl_out(b) for b in deleted])


@router.get("/v1/users", response_model=sm.UserListOut, responses=ERRORS)
async def list_users(http: Request, ctx: CtxDep) -> sm.UserListOut:
    """The SCRAM users stored at run time, with their mechanisms and iterations (never a secret). The
    principals file's users are in the file."""
    authz.check(http, _USERS)
    found = await asyncio.to_thread(scram_users.describe, ctx.metadata, None)
    return sm.UserListOut(
        users=[
            sm.UserOut(
                name=user,
                credentials=[sm.CredentialOut(mechanism=m, iterations=i) for m, i in sorted(creds.items())],  # type: ignore[arg-type]
            )
            for user, creds in found.items()
            if isinstance(creds, dict)
        ]
    )


@router.put(_USER, response_model=sm.UserOut, responses=ERRORS)
async def put_credential(
    http: Request, ctx: CtxDep, user: str, mechanism: sm.Mechanism, body: sm.ScramIn
) -> sm.UserOut:
    """Add or replace the user's credential for the mechanism (Kafka's AlterUserScramCredentials
    upsertion): from ``password``, or from ``salt`` and ``salted_password`` as a Kafka admin client
    computes them."""
    authz.check(http, _PUT_USER)
    salt, salted = _salted(mechanism, body)
    outcome = await scram_users.alter_and_reload(
        ctx.metadata, ctx.security, [scram_users.Alteration(user, mechanism, salt, salted, body.iterations)]
    )
    problem = outcome.get(user)
    if problem is not None:
        raise problem
    found = await asyncio.to_thread(scram_users.describe, ctx.metadata, [user])
    creds = found[user]
    assert isinstance(creds, dict)
    return sm.UserOut(
        name=user,
        credentials=[sm.CredentialOut(mechanism=m, iterations=i) for m, i in sorted(creds.items())],  # type: ignore[arg-type]
    )


def _salted(mechanism: str, body: sm.ScramIn) -> tuple[bytes, bytes]:
    """(salt, salted password) from the body: InvalidPayload unless it holds a password or both others."""
    if body.password is not None and body.salt is None and body.salted_password is None:
        salt = os.urandom(_SALT_BYTES)
        return salt, salted_password(mechanism, body.password, salt, body.iterations)
    if body.password is None and body.salt is not None and body.salted_password is not None:
        try:
            return base64.b64decode(body.salt, validate=True), base64.b64decode(
                body.salted_password, validate=True
            )
        except ValueError:  # binascii.Error, or a character outside ASCII
            raise InvalidPayload("salt and salted_password must be base64") from None
    raise InvalidPayload("send either password, or salt and salted_password")


@router.delete(_USER, status_code=204, responses=ERRORS)
async def delete_credential(http: Request, ctx: CtxDep, user: str, mechanism: sm.Mechanism) -> Response:
    """Remove the user's credential for the mechanism; 404 (40406) if there is none. Connections already
    authenticated with it stay, as in Kafka; new ones are refused."""
    authz.check(http, _DELETE_USER)
    outcome = await scram_users.alter_and_reload(
        ctx.metadata, ctx.security, [scram_users.Alteration(user, mechanism)]
    )
    problem = outcome.get(user)
    if problem is not None:
        raise problem
    return Response(status_code=204)


async def _reload(ctx: CtxDep) -> None:
    if ctx.security is not None:
        await asyncio.to_thread(ctx.security.refresh)
