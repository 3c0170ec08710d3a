"""The house figures of the code's layout, as a Markdown table for docs/development.md.

For each package (`app`, `batch`, `labeler`, `models`; the scripts of `benchmarks`,
`migrations` and `docs` apart): its modules, Python lines and lines of code (no blank, comment
or docstring line), its import floors (the longest chain of imports among its own modules),
the import cycles it is part of, its files over 500 lines and its functions over 100 lines;
then app's share of all the code outside tests, which tests are not counted in.

    python docs/layout_stats.py

The import graph counts imports inside functions too (an import cycle through a lazy import
is still a cycle); `tests/test_layout.py` uses it to refuse cycles.
"""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PACKAGES",
    "SCRIPTS",
    "PackageStats",
    "import_cycles",
    "import_floors",
    "import_graph",
    "code_lines",
    "main",
    "module_files",
    "package_stats",
    "render_table",
    "summed",
]

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("app", "batch", "labeler", "models")
SCRIPTS = ("benchmarks", "migrations", "docs")
LONG_FILE = 500
LONG_FUNCTION = 100

#: module -> {imported module: line of the first import}
Graph = dict[str, dict[str, int]]


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of `packages` under `root` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _base(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    # A relative import counts from the importing module's package.
    parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def import_graph(root: Path = ROOT, packages: Sequence[str] = PACKAGES) -> Graph:
    """The imports among the modules of `packages`, wherever they are in the file.

    `import a.b` counts as a.b; `from a import b` as a.b when that is a module, else as a.
    Imports of anything outside `packages` are left out.

    Returns:
        For each module, the modules it imports with the line of the first such import.
    """
    files = module_files(root, packages)
    graph: Graph = {}
    for module, path in files.items():
        edges: dict[str, int] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _base(module, node, path.name == "__init__.py")
                names = (f"{base}.{alias.name}" for alias in node.names)
                targets = [name if name in files else base for name in names]
            else:
                continue
            for target in targets:
                if target in files and target != module:
                    edges.setdefault(target, node.lineno)
        graph[module] = edges
    return graph


def _components(graph: Graph) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative), each sorted, in a stable order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return sorted(found)


def _shortest_cycle(graph: Graph, start: str, within: set[str]) -> list[str]:
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child == start:
                chain = [node]
                while chain[-1] != start:
                    chain.append(previous[chain[-1]])
                return [*reversed(chain), start]
            if child in within and child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"{start} is on no cycle")  # unreachable for a component's member


def import_cycles(graph: Graph) -> list[list[str]]:
    """One import cycle per group of modules that import each other, directly or not.

    Returns:
        Each cycle as a chain `[a, b, ..., a]`: the shortest one through the group's first
        module (by name). A group of three or more may hold other cycles as well.
    """
    cycles = []
    for component in _components(graph):
        if len(component) > 1:
            cycles.append(_shortest_cycle(graph, component[0], set(component)))
    return cycles


def import_floors(graph: Graph, package: str) -> int:
    """The number of modules on the longest import chain inside `package` (0 if empty).

    The modules of a cycle count as one floor, so the answer is defined either way.
    """
    inside = {m for m in graph if m == package or m.startswith(package + ".")}
    sub = {m: {t: n for t, n in graph[m].items() if t in inside} for m in inside}
    groups = _components(sub)
    group_of = {m: i for i, members in enumerate(groups) for m in members}
    floors: dict[int, int] = {}

    def floor(group: int) -> int:
        if group not in floors:
            below = {group_of[t] for m in groups[group] for t in sub[m]} - {group}
            floors[group] = 1 + max((floor(g) for g in below), default=0)
        return floors[group]

    return max((floor(g) for g in range(len(groups))), default=0)


@dataclass(frozen=True)
class PackageStats:
    """The figures of one package, or of several summed (`floors` is then None)."""

    name: str
    modules: int
    lines: int
    floors: int | None
    cycles: int
    long_files: tuple[str, ...]
    long_functions: tuple[str, ...]
    code: int = 0


def code_lines(source: str) -> int:
    """Lines of code in `source`: not blank, not a comment, not part of a docstring."""
    tree = ast.parse(source)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        kinds = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
        if isinstance(node, kinds) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return sum(
        1
        for number, line in enumerate(source.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#") and number not in docstrings
    )


def _long_functions(path: Path, where: str) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    long = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > LONG_FUNCTION:
                long.append((node.lineno, f"{where}:{node.lineno} {node.name} ({length})"))
    return [text for _, text in sorted(long)]


def package_stats(
    name: str, graph: Graph, cycles: Sequence[Sequence[str]], root: Path = ROOT
) -> PackageStats:
    """Count the figures of the package (or folder) `name` under `root`; its import floors
    when `graph` holds its modules, else None (benchmarks)."""
    paths = sorted((root / name).rglob("*.py"))
    sources = {p.relative_to(root).as_posix(): p.read_text("utf-8") for p in paths}
    lines = {where: len(text.splitlines()) for where, text in sources.items()}
    long_functions = [f for p in paths for f in _long_functions(p, p.relative_to(root).as_posix())]
    return PackageStats(
        name=name,
        modules=len(paths),
        lines=sum(lines.values()),
        floors=import_floors(graph, name) if name in graph else None,
        cycles=sum(any(m == name or m.startswith(name + ".") for m in c) for c in cycles),
        long_files=tuple(f"{where} ({n})" for where, n in lines.items() if n > LONG_FILE),
        long_functions=tuple(long_functions),
        code=sum(code_lines(text) for text in sources.values()),
    )


def summed(name: str, parts: Sequence[PackageStats], cycles: int) -> PackageStats:
    """The figures of `parts` together, with the `cycles` among them."""
    return PackageStats(
        name=name,
        modules=sum(p.modules for p in parts),
        lines=sum(p.lines for p in parts),
        floors=None,
        cycles=cycles,
        long_files=tuple(f for p in parts for f in p.long_files),
        long_functions=tuple(f for p in parts for f in p.long_functions),
        code=sum(p.code for p in parts),
    )


def render_table(rows: Sequence[tuple[PackageStats, int | None]]) -> str:
    """The figures as a Markdown table; each row's share of the line count beside it, if any."""
    out = [
        f"| package | modules | lines | code lines | share | import floors | cycles "
        f"| files > {LONG_FILE} lines | functions > {LONG_FUNCTION} lines |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s, of in rows:
        share = "" if of is None else f"{100 * s.lines / of:.0f} %"
        floors = "" if s.floors is None else str(s.floors)
        out.append(
            f"| {s.name} | {s.modules} | {s.lines:,} | {s.code:,} | {share} | {floors} "
            f"| {s.cycles} | {len(s.long_files)} | {len(s.long_functions)} |"
        )
    return "\n".join(out)


def main() -> int:
    """Print the table, app's share, then the cycles, long files and long functions by name."""
    graph = import_graph(ROOT, PACKAGES)
    cycles = import_cycles(graph)
    packages = [package_stats(name, graph, cycles) for name in PACKAGES]
    together = summed("**packages**", packages, len(cycles))
    scripts = [package_stats(name, graph, cycles) for name in SCRIPTS]
    everything = summed("**all but tests**", [*packages, *scripts], len(cycles))
    rows: list[tuple[PackageStats, int | None]] = [(p, together.lines) for p in packages]
    rows += [(together, together.lines), *((s, None) for s in scripts), (everything, None)]
    app = next(p for p in packages if p.name == "app")
    out = [render_table(rows), ""]
    out.append(
        f"app/ holds {100 * app.code / everything.code:.1f} % of the code outside tests/ "
        f"(lines of code; the house keeps it at 25 % at most); "
        f"{100 * app.lines / together.lines:.0f} % of the four packages' lines."
    )
    out.append("")
    out += [f"- cycle: {' -> '.join(cycle)}" for cycle in cycles]
    out += [f"- file over {LONG_FILE} lines: {f}" for f in everything.long_files]
    out += [f"- function over {LONG_FUNCTION} lines: {f}" for f in everything.long_functions]
    sys.stdout.write("\n".join(out).rstrip() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
