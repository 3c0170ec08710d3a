"""The direction of dependencies (STYLE.md): libraries never reach into the service.

`labeler/`, `models/` and `batch/` must not import app, fastapi, starlette, sqlalchemy,
pydantic_settings or uvicorn, nor read environment variables; `migrations/`
imports only `app.db.models` from the app.
"""

from __future__ import annotations

import ast
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"app", "fastapi", "starlette", "sqlalchemy", "pydantic_settings", "uvicorn"}


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


#: Names that several top-level packages may share, each for a stated reason.
SHARED_NAMES = {
    "__init__": "package markers",
    "errors": "each library owns its base exception in errors.py (STYLE.md)",
    "configs": "data folders of TOML configurations, never imported",
    "models": "app/db/models.py is the SQLAlchemy convention that migrations/ imports",
    # Still to rename: each is one package's name for a different thing.
    "pacs": "app/pacs (the C-STORE listener) beside batch/pacs (DICOMweb, SR/GSPS writers)",
    "pipeline": "labeler/pipeline.py (spaCy) beside models/pipeline.py (image input)",
}
#: app/routes/ names each router after its URL resource (/v1/images, /v1/reports).
ROUTERS = "app/routes/"


def _module_names(package: str) -> dict[str, list[str]]:
    names: dict[str, list[str]] = {}
    for path in sorted((ROOT / package).rglob("*")):
        if "__pycache__" in path.parts:
            continue
        if str(path.relative_to(ROOT)).startswith(ROUTERS):
            continue
        if path.suffix == ".py":
            name = path.stem
        elif path.is_dir():
            name = path.name
        else:
            continue
        names.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return names


def _collisions(packages: list[str]) -> list[str]:
    owners: dict[str, list[str]] = {}
    for package in packages:
        owners.setdefault(package, []).append(package)
        for name, paths in _module_names(package).items():
            owners.setdefault(name, []).extend(paths)
    return [
        f"{name}: {', '.join(paths)}"
        for name, paths in sorted(owners.items())
        if name not in SHARED_NAMES and len({p.split("/")[0] for p in paths}) > 1
    ]


def test_layout_module_names_do_not_collide_across_packages() -> None:
    packages = [p for p in ("app", "labeler", "models", "batch") if (ROOT / p).is_dir()]
    collisions = _collisions(packages)
    assert not collisions, "modules that share a name across packages:\n" + "\n".join(collisions)


#: Names of the objects that cross from app/ into models/ and labeler/ (STYLE.md: type
#: them, `Predictor` not `Any`, so that mypy --strict checks the boundary).
SEAM_NAMES = {"predictor", "labeler", "nlp", "prediction", "meta"}
#: app/batch/ moves to its own package, which takes this check with it.
NOT_YET_CHECKED = ("app/batch/",)


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


def test_layout_app_types_what_crosses_into_the_libraries() -> None:
    offenders = []
    for path in _sources("app"):
        where = str(path.relative_to(ROOT))
        if not where.startswith(NOT_YET_CHECKED):
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
