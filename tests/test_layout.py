"""The direction of dependencies (STYLE.md): libraries never reach into the service.

`labeler/`, `models/` and `batch/` must not import app, fastapi, starlette, sqlalchemy,
pydantic_settings or uvicorn, nor read environment variables; each package imports only the
packages below it (labeler, models, batch, app); `migrations/` imports only `app.db.models`
from the app. No two modules import each other, even lazily; a module name is used once; and
what crosses between packages is typed.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"app", "fastapi", "starlette", "sqlalchemy", "pydantic_settings", "uvicorn"}
PACKAGES = ("app", "batch", "labeler", "models")


layout_stats = load_script("docs/layout_stats.py")


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


_ENV = ("environ", "getenv", "environb")


def _env_reads(tree: ast.AST) -> Iterator[int]:
    for node in ast.walk(tree):
        attribute = isinstance(node, ast.Attribute) and node.attr in _ENV
        imported = (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in _ENV for a in node.names)
        )
        if attribute or imported:
            yield node.lineno


@pytest.mark.parametrize("package", ["labeler", "models", "batch"])
def test_layout_libraries_do_not_import_the_service(package: str) -> None:
    files = _sources(package)
    assert files, f"{package}/ has no Python files"
    offenders = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for lineno, name in _imports(tree):
            if name.split(".")[0] in FORBIDDEN:
                offenders.append(f"{path.relative_to(ROOT)}:{lineno} imports {name}")
        for lineno in _env_reads(tree):
            offenders.append(f"{path.relative_to(ROOT)}:{lineno} reads the environment")
    assert not offenders, "\n".join(offenders)


def test_layout_migrations_import_only_db_models_from_app() -> None:
    offenders = []
    for path in _sources("migrations"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for lineno, name in _imports(tree):
            top = name.split(".")[0]
            if top == "app" and not (name == "app.db.models" or name.startswith("app.db.models.")):
                offenders.append(f"{path.relative_to(ROOT)}:{lineno} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_layout_detector_catches_violations() -> None:
    bad = ast.parse("import os\nfrom app.main import create_app\nx = os.environ['A']\n")
    assert [name for _, name in _imports(bad) if name.split(".")[0] in FORBIDDEN]
    assert list(_env_reads(bad)) == [3]


def test_layout_top_level_is_fixed() -> None:
    allowed = {
        "pyproject.toml", "Dockerfile", "docker-compose.yml", "README.md", "app", "batch",
        "labeler", "models", "migrations", "tests", "benchmarks", "docs", ".ci",
    }  # fmt: skip
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if tracked.returncode != 0:
        pytest.skip("not a git checkout")
    top = {line.split("/")[0] for line in tracked.stdout.splitlines() if line}
    extra = top - allowed - {".gitignore", ".dockerignore", "LICENSE"}
    assert not extra, f"unexpected top-level entries: {sorted(extra)}"


#: Module names (and subpackage names) used in more than one place, each for a stated reason.
SHARED_NAMES = {
    "errors": "each library owns its base exception in errors.py (STYLE.md)",
    "models": "app/db/models.py is the SQLAlchemy convention that migrations/ imports",
}
#: app/routes/ names each router after its URL resource (/v1/images, /v1/reports).
ROUTERS = "app/routes/"


def _module_names(root: Path, packages: tuple[str, ...]) -> dict[str, list[str]]:
    """Each module's and each (sub)package's name, with where it is used. Data folders
    (templates, patterns, configs) are not modules: they are left out."""
    names: dict[str, list[str]] = {}
    for package in packages:
        names.setdefault(package, []).append(f"{package}/")
        for path in sorted((root / package).rglob("*")):
            where = path.relative_to(root).as_posix()
            if "__pycache__" in path.parts or where.startswith(ROUTERS):
                continue
            if path.suffix == ".py" and path.name != "__init__.py":
                names.setdefault(path.stem, []).append(where)
            elif path.is_dir() and (path / "__init__.py").is_file():
                names.setdefault(path.name, []).append(f"{where}/")
    return names


def _collisions(root: Path, packages: tuple[str, ...]) -> list[str]:
    return [
        f"{name}: {', '.join(paths)}"
        for name, paths in sorted(_module_names(root, packages).items())
        if len(paths) > 1 and name not in SHARED_NAMES
    ]


def test_layout_module_names_do_not_collide_across_packages() -> None:
    collisions = _collisions(ROOT, PACKAGES)
    assert not collisions, (
        "modules or subpackages that share a name (rename one, or add the name to "
        "SHARED_NAMES with the reason):\n" + "\n".join(collisions)
    )


def test_layout_shared_names_are_current() -> None:
    names = _module_names(ROOT, PACKAGES)
    stale = [name for name in SHARED_NAMES if len(names.get(name, [])) < 2]
    assert not stale, f"SHARED_NAMES lists names no longer shared; remove them: {stale}"
    assert (ROOT / ROUTERS).is_dir(), f"{ROUTERS} is gone: remove ROUTERS"


def test_layout_collision_detector_covers_subpackages(tmp_path: Path) -> None:
    for folder in ("app/pacs", "batch/pacs", "batch/listen", "models/web"):
        (tmp_path / folder).mkdir(parents=True)
    for path in ("app/pacs/__init__.py", "batch/pacs/__init__.py", "batch/listen/__init__.py"):
        (tmp_path / path).write_text("")
    (tmp_path / "models" / "listen.py").write_text("")
    (tmp_path / "models" / "web" / "page.html").write_text("")  # a data folder: no module
    (tmp_path / "app" / "web.py").write_text("")
    assert _collisions(tmp_path, ("app", "batch", "models")) == [
        "listen: batch/listen/, models/listen.py",
        "pacs: app/pacs/, batch/pacs/",
    ]


#: Names of the objects that cross from app/ and batch/ (the service, the batch engine and
#: the listener) into models/ and labeler/ (STYLE.md: type them, `Predictor` not `Any`, so
#: that mypy --strict checks the boundary).
SEAM_NAMES = {"predictor", "labeler", "nlp", "prediction", "meta"}


def _untyped_seams(tree: ast.AST, where: str) -> Iterator[str]:
    for node in ast.walk(tree):
        annotated: list[tuple[str, ast.expr | None, int]] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            every = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            annotated = [(a.arg, a.annotation, node.lineno) for a in every]
        elif isinstance(node, ast.AnnAssign):
            target = node.target
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            annotated = [(name, node.annotation, node.lineno)]
        for name, annotation, lineno in annotated:
            if name in SEAM_NAMES and annotation is not None and "Any" in ast.unparse(annotation):
                yield f"{where}:{lineno} {name}: {ast.unparse(annotation)}"


@pytest.mark.parametrize("package", ["app", "batch"])
def test_layout_types_what_crosses_into_the_libraries(package: str) -> None:
    files = _sources(package)
    assert files, f"{package}/ has no Python files"
    offenders = []
    for path in files:
        where = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
        offenders.extend(_untyped_seams(tree, where))
    assert not offenders, "annotate these with the libraries' types:\n" + "\n".join(offenders)


def test_layout_seam_detector_catches_any() -> None:
    bad = ast.parse(
        "def f(predictor: Any, *, nlp: 'Any | None') -> None: ...\n"
        "class S:\n    labeler: Any = None\n"
        "def g(predictor: Predictor) -> None: ...\n"
    )
    assert [line.split(" ", 1)[1] for line in _untyped_seams(bad, "x")] == [
        "predictor: Any",
        "nlp: 'Any | None'",
        "labeler: Any",
    ]


# ---------------------------------------------------------------- the import graph

#: What each package may import of the others (module prefixes): only the packages below
#: it. models shares the label vocabulary of labeler/schema.py (STYLE.md), nothing more.
MAY_IMPORT = {
    "labeler": (),
    "models": ("labeler.schema",),
    "batch": ("labeler", "models"),
    "app": ("labeler", "models", "batch"),
}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _chain(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    """`a -> b -> a` with the line of each import: `a (line 3) -> b (line 9) -> a`."""
    steps = [f"{m} (line {graph[m][n]})" for m, n in zip(cycle, cycle[1:], strict=False)]
    return " -> ".join([*steps, cycle[-1]])


def test_layout_packages_import_only_the_packages_below_them() -> None:
    graph = layout_stats.import_graph(ROOT, PACKAGES)
    offenders = []
    for module, imported in sorted(graph.items()):
        package = module.split(".")[0]
        for name, line in sorted(imported.items()):
            other = name.split(".")[0]
            if other != package and not _within(name, MAY_IMPORT[package]):
                offenders.append(f"{module} (line {line}) imports {name}")
    assert not offenders, "imports against MAY_IMPORT:\n" + "\n".join(offenders)


def test_layout_has_no_import_cycles() -> None:
    graph = layout_stats.import_graph(ROOT, PACKAGES)
    cycles = [_chain(graph, cycle) for cycle in layout_stats.import_cycles(graph)]
    assert not cycles, (
        "modules that import each other (imports inside functions count: move the shared "
        "piece to the module it belongs to, or a third one):\n" + "\n".join(cycles)
    )


def test_layout_routes_do_not_import_each_other() -> None:
    # STYLE.md: a route that imports another route module is a responsibility in the wrong
    # place; what two routes share (a response builder) lives outside app/routes/.
    graph = layout_stats.import_graph(ROOT, PACKAGES)
    offenders = [
        f"{module} (line {line}) imports {name}"
        for module, imported in sorted(graph.items())
        if module.startswith("app.routes.")
        for name, line in sorted(imported.items())
        if name.startswith("app.routes.") and name.split(".")[2] != module.split(".")[2]
    ]
    assert not offenders, "route modules importing route modules:\n" + "\n".join(offenders)


def test_layout_cycle_detector_sees_lazy_imports_and_from_imports(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    files = {
        "__init__.py": "",
        "a.py": "def f() -> None:\n    from pkg import b\n",  # lazy, and a from-import
        "b.py": "import os\n\nimport pkg.c\n",
        "c.py": "from pkg.a import f\n",
        "d.py": "from pkg import a, VALUE\n",  # a is a module; VALUE is not: pkg itself
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).write_text(text)
    graph = layout_stats.import_graph(tmp_path, ("pkg",))
    assert graph["pkg.d"] == {"pkg.a": 1, "pkg": 1}
    [cycle] = layout_stats.import_cycles(graph)
    assert cycle == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    assert _chain(graph, cycle) == "pkg.a (line 2) -> pkg.b (line 3) -> pkg.c (line 1) -> pkg.a"


# One public class name, one thing: `app.db.models.Prediction` beside
# `models.predict.Prediction` read as the same object in every file that used both.
def _public_classes() -> dict[str, list[str]]:
    defined: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in tree.body:
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    defined.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    return defined


def test_public_class_names_are_defined_once() -> None:
    twice = {name: paths for name, paths in _public_classes().items() if len(paths) > 1}
    assert not twice, f"classes defined in several modules (rename one): {twice}"


def test_layout_the_image_copies_every_package() -> None:
    # The Dockerfile names the packages one by one: a new top-level package (batch/, last
    # round) must not be left out of the image.
    import re
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(re.findall(r"^COPY (\w+) \./\1$", (ROOT / "Dockerfile").read_text(), re.M))
    assert packages <= copied, f"the Dockerfile does not COPY {sorted(packages - copied)}"


def test_layout_code_lines_leave_out_blanks_comments_and_docstrings() -> None:
    source = (
        '"""Module.\n\nMore."""\n\n# why\nx = 1\n\n\n'
        'def f() -> str:\n    """Doc."""\n    return "a"  # inline\n'
    )
    assert layout_stats.code_lines(source) == 3  # x = 1, def f, return
