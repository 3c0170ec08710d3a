"""The service's one settings object, read from `CXR_*` environment variables.

Built on demand by `get_settings()` (cached), never at import, so tests and the
CLI can build their own `Settings(...)` and pass it to `create_app`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.security import parse_named_entry, split_api_keys

__all__ = ["Settings", "SettingsError", "build_settings", "get_settings"]


class SettingsError(ValueError):
    """Refused configuration, one line per bad `CXR_*` value (values are not echoed)."""


def _split_paths(value: object) -> object:
    # `CXR_BATCH_ROOTS=/data/a:/data/b` (or commas) is friendlier than a JSON list.
    if isinstance(value, str):
        sep = "," if "," in value else None
        parts = value.split(sep) if sep else value.replace(":", ",").split(",")
        return [p.strip() for p in parts if p.strip()]
    return value


class Settings(BaseSettings):
    """Service configuration. Every field can be set as `CXR_<FIELD>` (case-insensitive)."""

    # hide_input_in_errors: a refused setting's message must not echo API keys.
    model_config = SettingsConfigDict(
        env_prefix="CXR_", extra="ignore", frozen=True, hide_input_in_errors=True
    )

    model: Path | None = Field(
        default=None, description="Checkpoint to serve; without one, image prediction answers 503."
    )
    device: str = Field(default="auto", description="Torch device for the model: auto, cpu, cuda.")
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="Arithmetic of the model: auto (bfloat16 on a GPU that computes it "
        "natively, else float32), float32, or bfloat16 (on CPUs with AMX or AVX512-BF16 "
        "several times faster than float32; probabilities move by about 0.01).",
    )
    storage_dir: Path = Field(
        default=Path("storage"),
        description="Folder for heatmaps, uploads and the default SQLite database; "
        "nothing is written outside it.",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db; "
        "default: SQLite file cxr.db in storage_dir.",
    )
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        repr=False,
        description="Accepted X-API-Key values, one per comma; an entry `sha256:<64 hex>` "
        "(as `cxr apikey` prints) gives the key's SHA-256 instead of the key itself; a key "
        "in clear needs at least 16 characters. An unusable entry stops start-up.",
    )
    batch_roots: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="Server folders that POST /v1/batches may read (comma or colon separated).",
    )
    max_upload_mb: float = Field(default=100.0, gt=0, description="Largest request body (413).")
    max_batch_upload_mb: float = Field(
        default=4096.0, gt=0, description="Largest zip upload to POST /v1/batches (413)."
    )
    max_json_mb: float = Field(
        default=2.0,
        gt=0,
        description="Largest body of every request that is not a file upload (JSON: report "
        "labeling, batch requests), MiB (413). JSON is parsed on the event loop: this bounds "
        "how long one request can hold up the others (issue 18).",
    )
    zip_max_uncompressed_mb: float = Field(
        default=10240.0, gt=0, description="Refuse zips that would expand beyond this (MiB)."
    )
    zip_max_ratio: float = Field(
        default=200.0,
        gt=1,
        description="Refuse zips whose members, or whose whole, expand more than "
        "this many times (zip bombs).",
    )
    zip_max_members: int = Field(
        default=50_000, gt=0, description="Refuse zips with more members than this."
    )
    max_pixels: int | None = Field(
        default=50_000_000,
        gt=0,
        description="Largest image accepted, in pixels (rows x columns), read from the DICOM or "
        "PNG/JPEG header before decoding; larger ones answer 413. Empty: no limit beyond "
        "10000 per side.",
    )
    max_reports_per_request: int = Field(default=256, gt=0)
    max_report_chars: int = Field(default=100_000, gt=0)
    max_report_chars_per_request: int = Field(
        default=1_000_000,
        gt=0,
        description="Characters of report text in one POST /v1/reports/label, all reports "
        "together (413 beyond): labeling is serialized, so one huge request would hold up "
        "every other caller for minutes.",
    )
    max_waiting_label_requests: int = Field(
        default=64,
        gt=0,
        description="POST /v1/reports/label requests that may wait for the (serialized) "
        "labeler at once; more answer 503 with Retry-After.",
    )
    label_set: str = Field(
        default="chestxray14",
        description="Label set of POST /v1/reports/label: chestxray14, chestxray8 or chexpert "
        "(the CheXpert labeler's 14 observations and conventions).",
    )
    inference_max_batch: int = Field(
        default=8, gt=0, description="Concurrent image requests batched into one forward pass."
    )
    inference_max_wait_ms: float = Field(default=5.0, ge=0)
    max_concurrent_decodes: int = Field(
        default=2,
        gt=0,
        description="Image uploads decoded at once (each holds its image at full resolution, "
        "about 6 bytes a pixel: 0.3 GB at 50 megapixels); the others wait with their upload "
        "spooled to disk. Decoding is CPU-bound: more than the cores gains nothing.",
    )
    max_waiting_decodes: int = Field(
        default=32,
        gt=0,
        description="Image uploads waiting for a decode slot, at most, from all clients; "
        "beyond, 503 with Retry-After.",
    )
    max_decodes_per_client: int = Field(
        default=4,
        gt=0,
        description="Image uploads of one client address decoding or waiting to, at most; "
        "beyond, 503 with Retry-After.",
    )
    decode_in_workers: bool = Field(
        default=True,
        description="Decode image uploads in worker processes (one per decode slot), so that "
        "an upload that crashes or hangs its decoder fails that request (422) instead of the "
        "service; false: in the service's threads.",
    )
    decode_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="An upload decoding longer fails (422) and its worker is replaced "
        "(with CXR_DECODE_IN_WORKERS).",
    )
    batch_chunk_size: int = Field(default=8, gt=0, description="Images per forward pass in jobs.")
    batch_job_slice_s: float = Field(
        default=60.0,
        gt=0,
        description="A batch job that has run this long while another job waits yields to "
        "it after its current chunk and goes back to the end of the queue (round-robin).",
    )
    batch_workers: int | None = Field(
        default=None,
        ge=0,
        description="Processes that decode a batch job's images ahead of the model (also "
        "`cxr batch`'s default): unset for the number of cores, 0 to decode one image at a "
        "time in the job's own thread. In a worker, a file that crashes the decoder or runs "
        "past CXR_BATCH_FILE_TIMEOUT_S fails alone.",
    )
    batch_file_timeout_s: float | None = Field(
        default=300.0,
        gt=0,
        description="A batch job gives up reading one file after this many seconds "
        "(a decoder that never returns); unset for no limit.",
    )
    run_batch_jobs: bool = Field(
        default=True, description="Run (and resume) batch jobs in this process."
    )
    store_uploads: bool = Field(
        default=False,
        description="Keep uploaded DICOM files in storage (they carry patient data); "
        "by default only derived pixels and heatmaps are kept.",
    )
    store_report_text: bool = Field(
        default=False,
        description="Keep report text in the database: each finding's evidence words and "
        "sentence in label_results.mentions. Off by default: only labels, character offsets, "
        "rule ids, sections and statuses are stored (the full report never is, only its "
        "SHA-256). API responses always include the evidence text for the caller.",
    )
    dicomweb_url: str | None = Field(
        default=None,
        description='The PACS\'s DICOMweb service root that POST /v1/batches {"dicomweb": ...} '
        "pulls from (and pushes SR/GSPS to); clients cannot name another server.",
    )
    dicomweb_user: str | None = Field(default=None, description="DICOMweb basic-auth user.")
    dicomweb_password: str | None = Field(
        default=None, repr=False, description="DICOMweb basic-auth password."
    )
    dicomweb_token: str | None = Field(
        default=None, repr=False, description="DICOMweb bearer token (instead of basic auth)."
    )
    # DICOMweb bounds (issue 18): what the PACS may make a job read, and for how long.
    dicomweb_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="Seconds for a whole DICOMweb request, connection to last byte (not per "
        "read): a slower answer fails (a WADO-RS one fails its file, the job goes on).",
    )
    dicomweb_max_instance_mb: float = Field(
        default=256.0,
        gt=0,
        description="Largest WADO-RS answer (MiB, on the wire and decoded: gzip is inflated "
        "under the cap); a larger instance fails, the job goes on.",
    )
    dicomweb_max_json_mb: float = Field(
        default=8.0, gt=0, description="Largest QIDO-RS page or STOW-RS answer (MiB)."
    )
    dicomweb_max_results: int = Field(
        default=200_000,
        gt=0,
        description="QIDO-RS results (studies, series, instances) one job's search may list; "
        "beyond, the job fails asking for a narrower search (a server paging forever ends).",
    )
    log_patient_data: bool = Field(
        default=False, description="Allow identifying tags (UIDs, accession) in logs."
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names (comma separated) the service answers to besides localhost, "
        "127.0.0.1, [::1] and CXR_HOST; others get 400 (DNS rebinding). Enforced always "
        "without API keys; with keys only once set. `*` accepts any Host.",
    )
    # `cxr listen` bounds (batch/listen/association_guard.py ListenerLimits, same defaults;
    # the flags of the same names win; docs/security/listener.md).
    listen_max_dataset_mb: float = Field(
        default=128.0,
        gt=0,
        description="`cxr listen`: abort a C-STORE whose dataset grows beyond this (MiB) "
        "while it is received.",
    )
    listen_max_pdu: int = Field(
        default=131_072,
        ge=4096,
        le=4 * 1024 * 1024,
        description="`cxr listen`: maximum PDU length advertised and enforced (bytes).",
    )
    listen_max_associations: int = Field(
        default=32, gt=0, le=1000, description="`cxr listen`: associations open at once."
    )
    listen_max_associations_per_host: int = Field(
        default=4,
        gt=0,
        le=1000,
        description="`cxr listen`: connections open at once from one peer address.",
    )
    listen_association_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="`cxr listen`: seconds from connection to a complete A-ASSOCIATE-RQ.",
    )
    listen_idle_timeout_s: float = Field(
        default=60.0, gt=0, description="`cxr listen`: abort an association silent this long."
    )
    listen_max_association_s: float = Field(
        default=3600.0, gt=0, description="`cxr listen`: abort an association open this long."
    )
    listen_evict_quiet_s: float = Field(
        default=10.0,
        ge=0,
        description="`cxr listen`: at the association cap, a new association aborts the "
        "open one that has received no instance (C-STORE) for longest, if for at least "
        "this long (keep-alive associations give way to senders with work).",
    )
    listen_min_free_mb: float = Field(
        default=1024.0,
        ge=0,
        description="`cxr listen`: refuse instances (0xA700) while the inbox's file system "
        "has less than this free (MiB; 0: no reserve).",
    )
    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="A connection whose request head is not complete this long after it "
        "opened (or after its previous response) gets 408 and is closed.",
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A request body with no data for this long gets 408 (connection closed).",
    )
    body_min_rate: float = Field(
        default=16384.0,
        ge=0,
        description="Bytes a second a request body must average once it has been read for "
        "longer than CXR_BODY_TIMEOUT_S (408 below); 0: no minimum. This bounds a body's "
        "time by its size: a 100 MiB upload has at most 30 s + 6,400 s.",
    )
    send_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A connection whose client reads nothing of its response for this long "
        "is closed (nginx's send_timeout).",
    )
    send_min_rate: float = Field(
        default=16384.0,
        ge=0,
        description="Bytes a second a client must read of its responses on average once a "
        "connection has been writing for longer than CXR_SEND_TIMEOUT_S (closed below); 0: "
        "no minimum.",
    )
    response_timeout_s: float = Field(
        default=120.0,
        ge=0,
        description="What the server writes to a connection must have been read by its "
        "client within this many seconds of its first byte (the count restarts with a "
        "request that starts once everything before it was sent; pipelined requests share "
        "one budget), else the connection is reset; 0: no budget. At "
        "CXR_SEND_MIN_RATE this is about 1.9 MB: a larger response (a big batch export) "
        "needs a client that reads faster.",
    )
    max_connections: int = Field(
        default=1024,
        gt=0,
        description="Open connections at most. At the cap a new connection closes the "
        "longest idle one, else the one whose client has not read its response longest, "
        "else the oldest request body still arriving; when all are busy in the app it gets "
        "503 (a reserve of 8 more answers /healthz and /readyz only). Lowered at start-up "
        "if the open-file limit needs it (`cxr serve` first raises the soft limit to the "
        "hard one).",
    )
    log_repeat_limit: int = Field(
        default=10,
        ge=0,
        description="Identical warnings (same logger and message) logged at most this many "
        "times per CXR_LOG_REPEAT_WINDOW_S; the next one says how many were dropped. 0: no "
        "limit.",
    )
    log_repeat_window_s: float = Field(default=60.0, gt=0)
    host: str = "127.0.0.1"
    port: int = Field(default=8000, gt=0, lt=65536)

    @field_validator(
        "model",
        "database_url",
        "max_pixels",
        "batch_workers",
        "dicomweb_url",
        "dicomweb_user",
        "dicomweb_password",
        "dicomweb_token",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # `CXR_MODEL=` (as docker-compose writes an unset optional) means "none".
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("label_set")
    @classmethod
    def _check_label_set(cls, value: str) -> str:
        from labeler.labelsets import load_label_set

        try:
            load_label_set(value)
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        return value

    @field_validator("batch_roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        return _split_paths(value)

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        return split_api_keys(value) if isinstance(value, str) else value

    @field_validator("api_keys")
    @classmethod
    def _check_keys(cls, value: list[str]) -> list[str]:
        # Refuse at start-up (InvalidApiKeyConfig is a ValueError) rather than serve
        # with a key nobody meant, e.g. `sha256` split off its hash.
        for position, entry in enumerate(value, start=1):
            parse_named_entry(entry, position)
        return [entry.strip() for entry in value]

    @property
    def resolved_batch_workers(self) -> int:
        """`batch_workers`, unset meaning the cores this process may use."""
        if self.batch_workers is not None:
            return self.batch_workers
        from models.decode_pool import default_workers

        return default_workers()

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to an SQLite file inside `storage_dir`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.storage_dir / 'cxr.db').resolve()}"


def build_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with `overrides` (e.g. command-line options) winning.

    Raises:
        SettingsError: a value is refused; the message names each `CXR_*` variable and why.
    """
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"][:1])
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append(f"CXR_{field.upper()}: {message}")
        raise SettingsError("invalid settings: " + "; ".join(problems)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Return the process-wide settings, read from the environment on first call.

    Raises:
        SettingsError: a `CXR_*` value is refused.
    """
    return build_settings()
