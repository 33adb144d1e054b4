"""Deciding one request against Kafka's ACLs, as Kafka's StandardAuthorizer does.

For (principal, host, operation, resource type, resource name):
1. a super user is allowed;
2. the bindings that apply are those whose principal is the user or ``User:*``, whose host is the client's
   address or ``*``, and whose pattern covers the name (LITERAL: the name itself or ``*``; PREFIXED: a
   prefix of the name);
3. any applying DENY for the operation (or ALL) denies;
4. else any applying ALLOW for the operation, for ALL, or for an operation that implies it allows:
   READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
5. else denied (Kafka's ``allow.everyone.if.no.acl.found=false``).
A DENY of an implying operation does not deny the implied one (a DENY on READ leaves DESCRIBE as it is),
as in Kafka.

``allowed_on_some`` is Kafka's ``authorizeByResourceType`` (KIP-679): whether some name of the type allows
the operation once the DENY bindings are taken off; InitProducerId uses it (WRITE on any topic implies
IDEMPOTENT_WRITE on the cluster).

An ``Acls`` is immutable: the agent swaps in a new one when the stored ACLs change (agents/security.py).
Its bindings are indexed by (resource type, principal) and its decisions are memoised, so a check on the
request path costs a dictionary lookup once a name has been decided.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from storage.acl_model import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

# The operations whose ALLOW also allows the key's operation (besides the operation itself and ALL).
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}

# Memoised decisions per Acls; past this many, the memo starts again (names from clients are unbounded).
MEMO_ENTRIES = 65_536


def granting(op: Operation) -> frozenset[Operation]:
    """Every operation whose ALLOW allows ``op``."""
    return frozenset({op, Operation.ALL}) | IMPLIED_BY.get(op, frozenset())


def applies(binding: AclBinding, host: str, name: str) -> bool:
    """Whether ``binding`` (whose principal and resource type already match) covers this host and name."""
    if binding.host not in (WILDCARD, host):
        return False
    if binding.pattern_type is PatternType.LITERAL:
        return binding.resource_name in (name, WILDCARD)
    return name.startswith(binding.resource_name)


@dataclass(frozen=True, slots=True)
class Request:
    principal: str  # User:name
    host: str
    operation: Operation
    resource_type: ResourceType
    name: str


class Acls:
    """Every stored binding, and the decisions asked of them."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings = tuple(sorted(set(bindings)))
        self._by_key: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        for b in self.bindings:
            self._by_key.setdefault((b.resource_type, b.principal), []).append(b)
        self._memo: dict[Request, bool] = {}

    def __len__(self) -> int:
        return len(self.bindings)

    def _candidates(self, principal: str, resource_type: ResourceType) -> list[AclBinding]:
        own = self._by_key.get((resource_type, principal), [])
        everyone = (
            self._by_key.get((resource_type, WILDCARD_PRINCIPAL), [])
            if principal != WILDCARD_PRINCIPAL
            else []
        )
        return own + everyone

    def allowed(self, request: Request) -> bool:
        memo = self._memo
        decided = memo.get(request)
        if decided is None:
            decided = self._decide(request)
            if len(memo) >= MEMO_ENTRIES:
                memo.clear()
            memo[request] = decided
        return decided

    def _decide(self, r: Request) -> bool:
        allow = False
        grants = granting(r.operation)
        for b in self._candidates(r.principal, r.resource_type):
            if not applies(b, r.host, r.name):
                continue
            if b.permission is Permission.DENY:
                if b.operation in (r.operation, Operation.ALL):
                    return False
            elif b.operation in grants:
                allow = True
        return allow

    def allowed_on_some(self, principal: str, host: str, op: Operation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: an ALLOW for ``op`` (or ALL) on some pattern that no DENY
        dominates (a LITERAL DENY of the same name, a PREFIXED DENY of a prefix of it, or a DENY of ``*``)."""
        deny_literal: set[str] = set()
        deny_prefix: set[str] = set()
        allow: list[AclBinding] = []
        for b in self._candidates(principal, resource_type):
            if b.operation not in (op, Operation.ALL) or b.host not in (WILDCARD, host):
                continue
            if b.permission is Permission.DENY:
                if b.pattern_type is PatternType.LITERAL:
                    if b.resource_name == WILDCARD:
                        return False
                    deny_literal.add(b.resource_name)
                else:
                    deny_prefix.add(b.resource_name)
            else:
                allow.append(b)
        for b in allow:
            name = b.resource_name
            if b.pattern_type is PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefix for n in range(1, len(name) + 1)):
                return True
        return False
