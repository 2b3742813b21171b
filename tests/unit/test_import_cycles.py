"""The import graph of chalicelib, module by module, has no cycle.

import-linter (pyproject.toml) checks the packages against each other; this checks every module
against every other, inside a package too, with every import statement counted (in a function
or under TYPE_CHECKING as well: each is a dependency a reader has to follow)."""

from __future__ import annotations

import grimp

from chalicelib.core import aws


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (or a module importing itself),
    each sorted, found without recursion (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, pending = work[-1]
            step = next(pending, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1 or graph.direct_import_exists(importer=module, imported=module):
                    found.append(sorted(component))
    return sorted(found)


def test_given_chalicelib_when_its_imports_are_followed_then_no_module_comes_back_to_itself() -> None:
    graph = grimp.build_graph(aws.__name__.split(".")[0])
    assert len(graph.modules) > 50  # the whole package was read, not an empty graph
    assert cycles(graph) == []


def test_given_modules_importing_each_other_through_a_third_when_checked_then_the_cycle_is_found() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg.a", "pkg.b", "pkg.c", "pkg.d"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    graph.add_import(importer="pkg.d", imported="pkg.a")
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    graph.remove_import(importer="pkg.c", imported="pkg.a")
    assert cycles(graph) == []
