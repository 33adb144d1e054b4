"""Cycles in a dependency graph between operations: strongly connected components and one cycle in each.

The checker's G1c search (a cycle of write-read edges between transactions) runs on graphs of a few
thousand nodes, so Tarjan's algorithm is written iteratively: Python's recursion limit would stop a
recursive one on a long chain.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping, Set
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def strongly_connected(graph: Mapping[N, Set[N]]) -> list[list[N]]:
    """The components with more than one node (Tarjan; a self-loop alone is not a component here)."""
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack: list[N] = []
    components: list[list[N]] = []
    counter = 0
    nodes = set(graph) | {m for targets in graph.values() for m in targets}
    for root in nodes:
        if root in index:
            continue
        # Each frame: a node and the iterator over its successors still to visit.
        work = [(root, iter(sorted(graph.get(root, ()), key=repr)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ()), key=repr))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
    return components


def find_cycle(graph: Mapping[N, Set[N]], component: list[N]) -> list[N]:
    """A shortest cycle through the component's first node, inside the component: [a, b, ..., a]."""
    members = set(component)
    start = component[0]
    parent: dict[N, N] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(graph.get(node, ()), key=repr):
            if succ not in members:
                continue
            if succ == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return [*reversed(path), start]
            if succ not in parent:
                parent[succ] = node
                queue.append(succ)
    raise ValueError("the component has no cycle through its first node")
