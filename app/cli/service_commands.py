"""`cxr serve`, `cxr db upgrade`, `cxr db current`, `cxr apikey`: the service's commands.

Only the standard library and `app.cli.common` are imported at module level; the web
stack, torch and spaCy load inside the handlers, so `cxr label` starts fast.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli.common import CommandError, add_demo_argument, add_precision_argument, model_hint

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from app.settings import Settings

__all__ = ["register_admin", "register_serve"]


# --- serve -------------------------------------------------------------------------------


def register_serve(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `serve` to `cxr`."""
    p = sub.add_parser(
        "serve",
        help="run the HTTP API (report labeling, image prediction, batch jobs)",
        description="Start the FastAPI service with uvicorn. Settings come from CXR_* "
        "environment variables (CXR_MODEL, CXR_DATABASE_URL, CXR_STORAGE_DIR, CXR_API_KEYS, "
        "CXR_BATCH_ROOTS, CXR_MAX_UPLOAD_MB); options given here win. Without API keys the "
        "service only listens on localhost.",
    )
    p.add_argument("--host", help="address to bind (default 127.0.0.1, or CXR_HOST)")
    p.add_argument("--port", type=int, help="port (default 8000, or CXR_PORT)")
    p.add_argument("--model", type=Path, help="checkpoint to serve (or CXR_MODEL)")
    add_demo_argument(p)
    p.add_argument("--device", help="auto (default), cpu, cuda, cuda:1")
    add_precision_argument(p, env=True)
    p.add_argument("--storage-dir", type=Path, help="storage folder (or CXR_STORAGE_DIR)")
    p.add_argument("--database-url", help="SQLAlchemy URL (or CXR_DATABASE_URL)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(handler=_serve, log_style="service")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _settings_from_args(args: argparse.Namespace, fields: tuple[str, ...]) -> Settings:
    from app.settings import build_settings

    overrides = {f: getattr(args, f) for f in fields if getattr(args, f, None) is not None}
    return build_settings(**overrides)  # SettingsError: one line, exit status 2


def _serve(args: argparse.Namespace) -> int:
    settings = _settings_from_args(
        args, ("host", "port", "model", "device", "precision", "storage_dir", "database_url")
    )
    if not settings.api_keys and not _is_loopback(settings.host):
        raise CommandError(
            f"refusing to listen on {settings.host} without API keys: anyone on the network "
            "could use the API. Set CXR_API_KEYS (make a key with `cxr apikey`), or use "
            "--host 127.0.0.1"
        )
    if settings.decode_in_workers or (settings.run_batch_jobs and settings.resolved_batch_workers):
        from models.decode_pool import start_fork_server

        # Uploads' and jobs' decoding workers fork from it: started before torch's import,
        # it stays small, and the first upload or job does not wait for it.
        start_fork_server()
    if getattr(args, "demo", False):
        if settings.model is not None:
            raise CommandError(
                f"--demo serves the demo model, but a model is also given ({settings.model}, "
                "from --model or CXR_MODEL): drop one of them"
            )
        from models.demo import ensure_demo_model

        settings = settings.model_copy(update={"model": ensure_demo_model(settings.storage_dir)})
    predictor = None
    if settings.model is not None:
        if not settings.model.is_file():
            raise CommandError(
                model_hint(str(settings.model)).replace("--model", "--model/CXR_MODEL", 1)
            )
        from app.inference import load_model

        # CheckpointError, ModelsError: ValueError
        predictor = load_model(settings.model, settings.device, settings.precision)
    import uvicorn

    from app.main import create_app
    from app.server import connection_budget, guarded_protocol, repeat_filter

    app = create_app(settings, predictor=predictor)
    # Slow and hostile clients: bounded waits, connections and log lines.
    budget = connection_budget(settings.max_connections)
    with repeat_filter(settings.log_repeat_limit, settings.log_repeat_window_s):
        logging.getLogger("app").info(
            "serving on http://%s:%d (docs at /docs); at most %d connections",
            settings.host,
            settings.port,
            budget.max_connections,
        )
        uvicorn.run(
            app,
            host=settings.host,
            port=settings.port,
            log_level=args.log_level,
            log_config=None,  # keep the logging set up above
            proxy_headers=True,
            http=guarded_protocol(
                header_timeout_s=settings.header_timeout_s,
                max_connections=budget.max_connections,
                send_timeout_s=settings.send_timeout_s,
                min_send_rate=settings.send_min_rate,
                response_timeout_s=settings.response_timeout_s,
            ),
            backlog=budget.backlog,
        )
    return 0


def register_admin(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `db` and `apikey` to `cxr`."""
    _register_db(sub)
    _register_apikey(sub)


# --- db ----------------------------------------------------------------------------------


def _register_db(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("db", help="database maintenance (migrations)")
    db_sub = p.add_subparsers(dest="db_command", metavar="ACTION", required=True)
    up = db_sub.add_parser(
        "upgrade",
        help="apply the Alembic migrations (also done at service start-up)",
        description="Migrate CXR_DATABASE_URL (default: SQLite in CXR_STORAGE_DIR) to the "
        "latest schema, or to --revision.",
    )
    up.add_argument("--database-url", help="SQLAlchemy URL (default: CXR_DATABASE_URL)")
    up.add_argument("--storage-dir", type=Path, help="for the default SQLite file")
    up.add_argument("--revision", default="head")
    up.set_defaults(handler=_db_upgrade, log_level="info", log_style="service")
    cur = db_sub.add_parser("current", help="print the database's schema revision")
    cur.add_argument("--database-url")
    cur.add_argument("--storage-dir", type=Path)
    cur.set_defaults(handler=_db_current, log_level="info", log_style="service")


def _db_upgrade(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from app.db.migrate import current_revision, upgrade

    settings = _settings_from_args(args, ("database_url", "storage_dir"))
    url = settings.resolved_database_url
    engine = _engine(url)
    try:
        upgrade(url, args.revision, engine=engine)
        revision = current_revision(engine)
    except SQLAlchemyError as exc:
        raise CommandError(
            f"cannot migrate the database: {exc.__class__.__name__}: {exc}"
        ) from None
    finally:
        engine.dispose()
    sys.stderr.write(f"cxr db upgrade: database at revision {revision}\n")
    return 0


def _db_current(args: argparse.Namespace) -> int:
    from sqlalchemy.exc import SQLAlchemyError

    from app.db.migrate import current_revision

    settings = _settings_from_args(args, ("database_url", "storage_dir"))
    engine = _engine(settings.resolved_database_url)
    try:
        sys.stdout.write(f"{current_revision(engine) or 'none'}\n")
    except SQLAlchemyError as exc:
        raise CommandError(f"cannot read the database: {exc.__class__.__name__}: {exc}") from None
    finally:
        engine.dispose()
    return 0


def _engine(url: str) -> Engine:
    """The engine for `url`; a URL SQLAlchemy cannot use is the command's error."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.db.session import build_engine

    try:
        return build_engine(url)
    except SQLAlchemyError as exc:
        raise CommandError(
            f"cannot use the database URL: {exc.__class__.__name__}: {exc}"
        ) from None


# --- apikey ------------------------------------------------------------------------------


def _register_apikey(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "apikey",
        help="make a new API key and its hash for CXR_API_KEYS",
        description="Print a new random API key (give it to the client) and the line to put "
        "in CXR_API_KEYS (its SHA-256, so the key itself never sits in the server config).",
    )
    p.add_argument(
        "--name",
        help="who holds the key (e.g. dr-smith): recorded as the reviewer of worklist rows "
        "reviewed with it; default key-<first 8 hex digits of its hash>",
    )
    p.set_defaults(handler=_apikey, log_level="info", log_style="service")


def _apikey(args: argparse.Namespace) -> int:
    from app.security import InvalidApiKeyConfig, generate_api_key, hash_api_key, parse_named_entry

    key = generate_api_key()
    entry = hash_api_key(key) if not args.name else f"{args.name}={hash_api_key(key)}"
    try:
        parse_named_entry(entry)
    except InvalidApiKeyConfig as exc:
        raise CommandError(str(exc).replace("CXR_API_KEYS entry 1: ", "--name: ")) from None
    sys.stdout.write(f"key:          {key}\nCXR_API_KEYS={entry}\n")
    return 0
