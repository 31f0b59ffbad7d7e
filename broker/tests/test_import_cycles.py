"""No import cycles in `moldau`, type-only imports included (issue 34): the layers contract
(.importlinter) orders the packages, and this keeps the modules inside a package acyclic
too, so each module can be read, tested and loaded on its own. The graph is grimp's, the
library import-linter checks the layers with."""

from __future__ import annotations

import grimp


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    imports = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            module, child = work.pop()
            if child == 0:
                index[module] = low[module] = len(index)
                stack.append(module)
                on_stack.add(module)
            targets = imports[module]
            if child < len(targets):
                work.append((module, child + 1))
                target = targets[child]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            if work:  # hand this module's low link to the module that reached it
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_cycle() -> None:
    graph = grimp.ImportGraph()
    for module in ("p.a", "p.b", "p.c", "p.d"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    graph.add_import(importer="p.c", imported="p.d")
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_moldau_has_no_import_cycles() -> None:
    graph = grimp.build_graph("moldau")
    cycles = _cycles(graph)
    chains = [graph.find_shortest_chain(importer=c[1], imported=c[0]) for c in cycles]
    assert cycles == [], f"import cycles: {cycles}; e.g. {chains}"
