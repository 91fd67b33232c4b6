"""The code keeps to docs/architecture.md: each layer imports only what its row names, the pure
layers import nothing that touches the world, and no module imports another in a circle (type-only
imports included). The tables are read from the doc, so the doc and the code cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def table(heading: str, column: str = "may import") -> dict[str, set[str]]:
    """The doc's table headed ``| heading | column |``: each layer -> the names in its row."""
    rows: dict[str, set[str]] = {}
    lines = DOC.read_text().splitlines()
    start = lines.index(f"| {heading} | {column} |")
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        left, right = line.strip("|").split("|")[:2]
        names = set(re.findall(r"`([\w.]+)`", right))
        if "every layer" in right:
            names = {"*"}
        for layer in re.findall(r"`([\w.]+)`", left):
            rows[layer] = names
    return rows


MAY_IMPORT = table("layer")
SHUNNED = table("layer", column="may not import")


def modules() -> Iterator[tuple[str, Path]]:
    """Every module of both packages, by dotted name."""
    for package in ("engine", "events"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def layer_of(module: str) -> str:
    """The layer a module belongs to: its package and first folder (``engine.core``), or the
    package itself for the modules at its top."""
    parts = module.split(".")
    if parts[0] == "events":
        return "events." + parts[1] if len(parts) > 2 and parts[1] in ("fast", "stores") else "events"
    if len(parts) == 1 or not (ROOT / "engine" / parts[1]).is_dir():
        return "engine"
    return "engine." + parts[1]


def imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module ``module`` imports, anywhere in it (functions and ``TYPE_CHECKING`` too)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                yield ".".join(base + ([node.module] if node.module else [])), node.lineno
            else:
                assert node.module is not None
                yield node.module, node.lineno


ALL = list(modules())


def test_the_doc_names_every_layer() -> None:
    layers = {layer_of(module) for module, _ in ALL}
    assert layers == set(MAY_IMPORT), (
        f"docs/architecture.md's table of layers names {sorted(set(MAY_IMPORT) - layers)} that "
        f"the code lacks, and lacks {sorted(layers - set(MAY_IMPORT))}")


@pytest.mark.parametrize("module,path", ALL, ids=[module for module, _ in ALL])
def test_each_module_imports_only_what_its_layer_may(module: str, path: Path) -> None:
    own = layer_of(module)
    allowed = MAY_IMPORT[own]
    shunned = SHUNNED.get(own, set())
    wrong = []
    for target, line in imports(module, path):
        top = target.split(".")[0]
        if top in ("engine", "events"):
            theirs = layer_of(target)
            if theirs != own and "*" not in allowed and theirs not in allowed:
                wrong.append(f"line {line}: {target} (layer {theirs})")
        elif top in shunned:
            wrong.append(f"line {line}: {target} (the {own} layer stays away from it)")
    assert not wrong, (f"{module} ({own}) may import only {sorted(allowed)}, per "
                       f"docs/architecture.md; it imports " + "; ".join(wrong))


def test_no_import_circles() -> None:
    """Not even type-only ones: a reader follows those too."""
    graph: dict[str, set[str]] = {}
    names = {module for module, _ in ALL}
    for module, path in ALL:
        graph[module] = set()
        for target, _ in imports(module, path):
            # ``from . import x`` names a module too: take the longest name that is one
            while target and target not in names:
                target = target.rpartition(".")[0]
            if target and target != module and not module.startswith(target + "."):
                graph[module].add(target)
    circles = _strongly_connected(graph)
    assert not circles, "import circles: " + "; ".join(" -> ".join(sorted(c)) for c in circles)


def _strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iteratively: the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.add(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(component)
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The rule can fail: a core module importing trio or the runtime is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("import trio\nfrom ..runtime import session\n")
    found = list(imports("engine.core.bad", bad))
    assert ("trio", 1) in found and ("engine.runtime", 2) in found
    assert "trio" in SHUNNED["engine.core"] and "engine.runtime" not in MAY_IMPORT["engine.core"]
    assert _strongly_connected({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]
