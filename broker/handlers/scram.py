"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51): SCRAM users stored in the
metadata store, as Kafka's kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]' and admin clients
manage them. The rules are agents/scram_users.py's; describing needs DESCRIBE on the cluster and altering
ALTER on it (else CLUSTER_AUTHORIZATION_FAILED). Only stored credentials are described: a principal of the
principals file is in the file.
"""

from __future__ import annotations

import asyncio

from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

from agents import scram_users
from agents.permissions import CLUSTER, KAFKA, ApiKey
from agents.scram import MECHANISM_TYPES, TYPE_OF_MECHANISM
from broker import errors
from broker.context import BrokerContext
from storage.errors import StrataError

_DESCRIBE = KAFKA[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS].need(CLUSTER)
_ALTER = KAFKA[ApiKey.ALTER_USER_SCRAM_CREDENTIALS].need(CLUSTER)
_Described = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = _Described.CredentialInfo
_Altered = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


async def handle_describe_user_scram_credentials(
    ctx: BrokerContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    version = req.API_VERSION
    if not ctx.may(_DESCRIBE):
        return DescribeUserScramCredentialsResponse[version](
            throttle_time_ms=0,
            error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message="not allowed to describe SCRAM credentials",
            results=[],
        )
    names = [u.name for u in req.users] if req.users else None
    try:
        found = await asyncio.to_thread(scram_users.describe, ctx.metadata, names)
    except StrataError as exc:
        return DescribeUserScramCredentialsResponse[version](
            throttle_time_ms=0, error_code=errors.kafka_error(exc), error_message=exc.message, results=[]
        )
    results = []
    for user, outcome in found.items():
        if isinstance(outcome, StrataError):
            results.append(
                _Described(
                    user=user,
                    error_code=errors.kafka_error(outcome),
                    error_message=outcome.message,
                    credential_infos=[],
                )
            )
        else:
            infos = [_Info(mechanism=TYPE_OF_MECHANISM[m], iterations=i) for m, i in sorted(outcome.items())]
            results.append(
                _Described(user=user, error_code=errors.NONE, error_message=None, credential_infos=infos)
            )
    return DescribeUserScramCredentialsResponse[version](
        throttle_time_ms=0, error_code=errors.NONE, error_message=None, results=results
    )


def _mechanism(number: int) -> str:
    return MECHANISM_TYPES.get(number, f"unknown ({number})")


async def handle_alter_user_scram_credentials(
    ctx: BrokerContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    version = req.API_VERSION
    alterations = [scram_users.Alteration(d.name, _mechanism(d.mechanism)) for d in req.deletions] + [
        scram_users.Alteration(
            u.name,
            _mechanism(u.mechanism),
            bytes(u.salt or b""),
            bytes(u.salted_password or b""),
            u.iterations,
        )
        for u in req.upsertions
    ]
    users = list(dict.fromkeys(a.user for a in alterations))
    if not ctx.may(_ALTER):
        results = [
            _Altered(
                user=u,
                error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
                error_message="not allowed to alter SCRAM credentials",
            )
            for u in users
        ]
        return AlterUserScramCredentialsResponse[version](throttle_time_ms=0, results=results)
    try:
        outcome = await scram_users.alter_and_reload(ctx.metadata, ctx.security, alterations)
    except StrataError as exc:
        failed = exc.with_traceback(None)  # a traceback kept in a local makes a cycle with the frame
        outcome = dict.fromkeys(users, failed)
    results = [
        _Altered(
            user=u,
            error_code=errors.NONE if (e := outcome.get(u)) is None else errors.kafka_error(e),
            error_message=None if e is None else e.message,
        )
        for u in users
    ]
    return AlterUserScramCredentialsResponse[version](throttle_time_ms=0, results=results)
