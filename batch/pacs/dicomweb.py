"""A small DICOMweb client: QIDO-RS search, WADO-RS instance retrieval, STOW-RS store.

    with DicomwebClient("http://pacs:8042/dicom-web", user="ai", password="...") as web:
        for ref in web.iter_instances(since=date(2024, 1, 1), modalities=("CR", "DX")):
            if isinstance(ref, InstanceRef):
                data = web.retrieve_instance(ref)    # DICOM Part 10 bytes
        outcome = web.store([sr_bytes, gsps_bytes])   # STOW-RS

Every failure is a `DicomwebError` (a ValueError) naming the method, the URL (without
credentials), the HTTP status and the server's reason. Logs say what was searched,
pulled and pushed by size, and by UID only when `log_uids` is set; never patient names.

The server is not trusted (issue 18): every answer is streamed and cut at a byte cap,
on the wire and decoded (gzip and deflate are inflated a step at a time, so a bomb is
cut at the cap, not inflated first); QIDO-RS JSON is capped in size and nesting depth;
a search stops with an error past `max_results` results (so endless paging ends); each
request has a wall-clock deadline for the whole exchange, not per socket read, enforced
by cutting the connection; redirects are refused, never followed; and `abort()` (from
another thread) cuts the request in flight, so a cancelled job stops at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from batch.pacs.transfer import (
    BoundedHttp,
    HttpAnswer,
    TransferAborted,
    TransferDeadline,
    TransferError,
    TransferTooLarge,
)

__all__ = [
    "DicomwebAborted",
    "DicomwebClient",
    "DicomwebError",
    "DicomwebLimits",
    "DicomwebServer",
    "InstanceRef",
    "SearchFailure",
    "StoreOutcome",
    "redact_url",
]

log = logging.getLogger(__name__)

_DICOM = "application/dicom"
_JSON = "application/dicom+json"
_PAGE = 500  # QIDO results per request; servers cap pages, so results are paged
_UID = re.compile(r"[0-9]+(\.[0-9]+)*")  # fullmatch only: `$` would accept a final "\n"
_UID_IN_PATH = re.compile(r"[0-9]+(?:\.[0-9]+)+")
_CONNECT_S = 15.0  # at most, of the request's deadline: a blackholed host fails fast

# DICOM JSON tags (PS3.18 F.2).
_STUDY_UID, _SERIES_UID, _SOP_UID = "0020000D", "0020000E", "00080018"
_SOP_CLASS, _MODALITY, _STUDY_DATE = "00080016", "00080060", "00080020"
_FAILED_SOPS, _REFERENCED_SOPS, _FAILURE_REASON = "00081198", "00081199", "00081197"
_REF_SOP_UID = "00081155"


class DicomwebError(ValueError):
    """A DICOMweb request failed: the message names the method, URL, status and reason."""


class DicomwebAborted(DicomwebError):
    """The client was aborted (`DicomwebClient.abort`): a cancelled job, a stopping service."""


class _SearchLimit(DicomwebError):
    """A whole search is over `max_results`: not one series' failure, the search's."""


@dataclass(frozen=True)
class DicomwebLimits:
    """What one DICOMweb server may make the client read (the service's CXR_DICOMWEB_*).

    Attributes:
        max_instance_bytes: largest WADO-RS answer, counted both on the wire and decoded
            (default 256 MiB: over twice the ~100 MB of the largest image CXR_MAX_PIXELS
            accepts, 50 Mpx at 16 bits).
        max_json_bytes: largest QIDO-RS page or STOW-RS answer (default 8 MiB: a page of
            500 results is under 1 MB; parsed, hostile JSON can take 25 times its size).
        max_json_depth: deepest JSON nesting accepted (default 64; a QIDO-RS result is 4
            deep, 3 more per sequence level); deeper answers are refused before parsing.
        max_results: QIDO-RS results (studies, series and instances together) in one
            search (default 200,000). Pages hold 500, so this also caps the pages fetched:
            a server that pages forever stops with an error here.
    """

    max_instance_bytes: int = 256 * 2**20
    max_json_bytes: int = 8 * 2**20
    max_json_depth: int = 64
    max_results: int = 200_000


@dataclass(frozen=True, order=True)
class InstanceRef:
    """Where one instance lives on the server (UIDs from QIDO-RS)."""

    study_instance_uid: str
    series_instance_uid: str
    sop_instance_uid: str
    sop_class_uid: str | None = field(default=None, compare=False)
    modality: str | None = field(default=None, compare=False)

    @property
    def path(self) -> str:
        """The WADO-RS resource path below the service root, also the result line's `path`."""
        return (
            f"studies/{self.study_instance_uid}/series/{self.series_instance_uid}"
            f"/instances/{self.sop_instance_uid}"
        )


@dataclass(frozen=True)
class SearchFailure:
    """A part of a search that failed while the rest went on: a study or series whose
    listing failed, or a UID from the server that is not one.

    Attributes:
        path: `studies/UID`, `studies/UID/series/UID` or `.../instances/UID`; a UID that
            is not one appears as `invalid-<16 hex of its SHA-256>` (stable for a resume,
            and never the raw value, which may hold anything).
        reason: the error, naming the request or the refused value.
        study_instance_uid: the study, when its UID is valid.
    """

    path: str
    reason: str
    study_instance_uid: str | None = None


@dataclass
class StoreOutcome:
    """What a STOW-RS request stored: SOP Instance UIDs stored, and failed ones with reasons."""

    stored: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def redact_url(url: str) -> str:
    """The URL without user:password@, for logs and error messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _first(item: dict[str, Any], tag: str) -> Any:
    element = item.get(tag)
    values = element.get("Value") if isinstance(element, dict) else None
    return values[0] if isinstance(values, list) and values else None


def _is_uid(uid: str) -> bool:
    return len(uid) <= 64 and _UID.fullmatch(uid) is not None


def _bad(value: str) -> str:
    return repr(value[:70]) + ("..." if len(value) > 70 else "")


def _uid_error(uid: str, what: str) -> str:
    return f"{what} {_bad(uid)} is not a DICOM UID (digits and dots, at most 64)"


def _check_uid(uid: str, what: str) -> str:
    if not _is_uid(uid):
        raise DicomwebError(_uid_error(uid, what))
    return uid


def _invalid(value: str) -> str:
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"invalid-{digest[:16]}"


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_ONE_BRACKET = bytes.maketrans(b"{}", b"[]")


def _json_too_deep(data: bytes, limit: int) -> bool:
    """Whether the JSON text `data` nests arrays and objects deeper than `limit`.

    Without recursion, in C-speed passes: strings are removed, the brackets kept, and
    innermost pairs removed `limit` times; a pair left means deeper. Unbalanced text is
    left for the parser to refuse.
    """
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(_ONE_BRACKET, _NOT_BRACKETS)
    for _ in range(limit):
        inner = brackets.replace(b"[]", b"")
        if inner == brackets:
            return False
        brackets = inner
    return b"[]" in brackets


@dataclass(frozen=True)
class DicomwebServer:
    """A configured DICOMweb server (URL, credentials, limits), to open clients on demand."""

    url: str
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    timeout: float = 120.0
    log_uids: bool = False
    limits: DicomwebLimits = field(default_factory=DicomwebLimits)

    def client(self) -> DicomwebClient:
        """A new client (the caller closes it)."""
        return DicomwebClient(
            self.url,
            user=self.user,
            password=self.password,
            token=self.token,
            timeout=self.timeout,
            log_uids=self.log_uids,
            limits=self.limits,
        )


class _Budget:
    """QIDO-RS results left to a search."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0


class DicomwebClient:
    """DICOMweb (QIDO-RS, WADO-RS, STOW-RS) against one service root.

    A client is meant for one thread at a time (a batch job's); `abort` may be called from
    any thread.

    Args:
        url: the service root, e.g. http://127.0.0.1:8042/dicom-web.
        user, password: HTTP basic auth.
        token: bearer token (instead of basic auth).
        timeout: seconds for a whole request, from connecting to the last byte of the
            answer (not per socket read); past it the connection is cut. Default 120:
            a 256 MiB instance at 20 Mbit/s, or an archive taking a minute to start.
        transport: an httpx transport (tests).
        log_uids: name studies and instances by UID in logs (False: counts and sizes only).
        limits: byte, depth and result caps on what the server sends (`DicomwebLimits`).

    Raises:
        DicomwebError: the URL is not http(s), or both basic and bearer auth are given.
    """

    def __init__(
        self,
        url: str,
        *,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
        log_uids: bool = True,
        limits: DicomwebLimits | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise DicomwebError(
                f"DICOMweb URL {redact_url(url)!r} must be http(s)://host[:port]/path"
            )
        if token and (user or password):
            raise DicomwebError("give either --user/--password or --token, not both")
        if not timeout > 0:
            raise DicomwebError(f"DICOMweb timeout {timeout!r}: expected seconds > 0")
        if parts.username is not None:  # credentials in the URL: move them to the auth
            user, password = parts.username, parts.password or ""
        self.url = redact_url(url).rstrip("/")
        auth: httpx.Auth | None = None
        # Only codings inflated here under the cap (httpx would also ask for br and zstd).
        headers = {"Accept-Encoding": "gzip, deflate"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif user is not None:
            auth = httpx.BasicAuth(user, password or "")
        self._http = httpx.Client(
            auth=auth,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, _CONNECT_S)),
            transport=transport,
            follow_redirects=False,  # the configured server is the only one reached
        )
        self._transfer = BoundedHttp(self._http, timeout)
        self.timeout = timeout
        self.log_uids = log_uids
        self.limits = limits or DicomwebLimits()

    def _shown(self, uid: str) -> str:
        # The service logs no identifying tags unless CXR_LOG_PATIENT_DATA is set.
        return uid if self.log_uids else "<uid>"

    def _shown_path(self, path: str) -> str:
        return path if self.log_uids else _UID_IN_PATH.sub("<uid>", path)

    def __enter__(self) -> DicomwebClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()

    def abort(self, reason: str = "aborted") -> None:
        """Cut the request in flight and refuse every later one (thread-safe).

        For a job cancelled or a service stopping while a fetch hangs: the thread making
        the request gets a `DicomwebAborted` at once instead of waiting for the server.
        """
        self._transfer.abort(reason)

    @property
    def aborted(self) -> bool:
        """Whether `abort` was called."""
        return self._transfer.aborted

    # ------------------------------------------------------------------ requests

    def _exchange(
        self,
        method: str,
        path: str,
        *,
        max_bytes: int,
        limit_name: str,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
    ) -> HttpAnswer:
        """One request, its answer streamed under `max_bytes` and the deadline.

        Raises:
            DicomwebError: no connection, deadline passed, answer too large, a status
                other than 2xx (a redirect included); `DicomwebAborted` after `abort`.
        """
        url = f"{self.url}/{path}"
        what = f"{method} {url}"
        try:
            answer = self._transfer.exchange(
                method, url, max_bytes=max_bytes, params=params, headers=headers, content=content
            )
        except TransferAborted as exc:
            raise DicomwebAborted(f"{what}: {exc}") from None
        except TransferTooLarge as exc:
            raise DicomwebError(
                f"{what}: {exc}. Raise {limit_name} if such answers are expected"
            ) from None
        except TransferDeadline as exc:
            remedy = "; CXR_DICOMWEB_TIMEOUT_S, --timeout" if exc.cut else ""
            raise DicomwebError(f"{what}: {exc}{remedy}") from None
        except TransferError as exc:
            raise DicomwebError(f"{what}: {exc}") from None
        status = answer.status
        if 300 <= status < 400:
            raise DicomwebError(
                f"{what}: HTTP {status} {answer.reason}: the server redirects to "
                f"{_origin(answer.headers.get('location', ''), url)}; redirects are not "
                "followed (only the configured server is reached): configure the URL the "
                "DICOMweb service answers on"
            )
        if not 200 <= status < 300:
            text = answer.body.decode("utf-8", "replace").strip().replace("\n", " ")
            reason = f": {text[:300]}" if text else ""
            raise DicomwebError(f"{what}: HTTP {status} {answer.reason}{reason}")
        return answer

    def _qido(self, path: str, params: dict[str, str], budget: _Budget) -> Iterator[dict[str, Any]]:
        offset = 0
        previous: list[Any] | None = None
        while True:
            page = params | {"limit": str(_PAGE), "offset": str(offset)}
            answer = self._exchange(
                "GET",
                path,
                params=page,
                headers={"Accept": _JSON},
                max_bytes=self.limits.max_json_bytes,
                limit_name="CXR_DICOMWEB_MAX_JSON_MB",
            )
            if answer.status == 204 or not answer.body.strip():
                return
            items = self._json(answer, f"GET {self.url}/{path}")
            if not isinstance(items, list):
                raise DicomwebError(f"GET {self.url}/{path}: expected a JSON array of results")
            if items == previous:  # a server that ignores offset: stop, don't loop
                log.warning(
                    "QIDO-RS %s/%s: the server ignores offset; paging stopped",
                    self.url, self._shown_path(path),
                )  # fmt: skip
                return
            budget.used += len(items)
            if budget.used > budget.limit:
                raise _SearchLimit(
                    f"GET {self.url}/{path}: more than {budget.limit} results in one search "
                    "(studies, series and instances together; a server that never stops "
                    "paging ends here): narrow the search (--study, --since, --modality) or "
                    "raise CXR_DICOMWEB_MAX_RESULTS (--max-results)"
                )
            yield from (i for i in items if isinstance(i, dict))
            if len(items) < _PAGE:
                return
            offset += len(items)
            previous = items

    def _json(self, answer: HttpAnswer, what: str) -> Any:
        depth = self.limits.max_json_depth
        if _json_too_deep(answer.body, depth):
            raise DicomwebError(f"{what}: the JSON answer nests deeper than {depth} levels")
        try:
            return json.loads(answer.body)
        except RecursionError:  # unbalanced text the scan left to the parser
            raise DicomwebError(f"{what}: the JSON answer nests too deeply") from None
        except ValueError:
            raise DicomwebError(
                f"{what}: the answer is not DICOM JSON "
                f"(Content-Type {answer.headers.get('content-type', '')[:80]!r})"
            ) from None

    # ------------------------------------------------------------------ QIDO-RS

    def search_studies(
        self,
        *,
        study_uids: Sequence[str] = (),
        since: date | None = None,
        modalities: Sequence[str] = (),
    ) -> list[str]:
        """StudyInstanceUIDs matching all filters given (QIDO-RS /studies).

        Args:
            study_uids: only these studies (each is looked up; missing ones are logged).
            since: StudyDate on or after this day.
            modalities: studies with any of these modalities (ModalitiesInStudy).

        Returns:
            Sorted, distinct StudyInstanceUIDs.

        Raises:
            DicomwebError: a request failed, a limit was passed, or the server answered a
                StudyInstanceUID that is not a UID.
        """
        found, failures = self._studies(
            study_uids, since, modalities, _Budget(self.limits.max_results)
        )
        if failures:
            raise DicomwebError(failures[0].reason)
        return found

    def _studies(
        self,
        study_uids: Sequence[str],
        since: date | None,
        modalities: Sequence[str],
        budget: _Budget,
    ) -> tuple[list[str], list[SearchFailure]]:
        base: dict[str, str] = {"includefield": "00080061"}
        if since is not None:
            base["StudyDate"] = f"{since:%Y%m%d}-"
        # One query per UID and per modality: list matching of either is not supported
        # by every server (Orthanc's plugin among them), exact matching is.
        uid_params = [{"StudyInstanceUID": _check_uid(u, "StudyInstanceUID")} for u in study_uids]
        modality_params = [{"ModalitiesInStudy": m} for m in modalities]
        found: set[str] = set()
        bad: dict[str, str] = {}
        for by_uid in uid_params or [{}]:
            for by_modality in modality_params or [{}]:
                for item in self._qido("studies", base | by_uid | by_modality, budget):
                    uid = _first(item, _STUDY_UID)
                    if isinstance(uid, str) and _is_uid(uid):
                        found.add(uid)
                    elif isinstance(uid, str):
                        bad.setdefault(
                            _invalid(uid), _uid_error(uid, f"StudyInstanceUID from {self.url}")
                        )
        for uid in study_uids:
            if uid not in found:
                log.warning(
                    "study %s: not found on %s with the filters given", self._shown(uid), self.url
                )
        log.info("QIDO-RS %s: %d studies match", self.url, len(found))
        failures = [SearchFailure(f"studies/{key}", reason) for key, reason in sorted(bad.items())]
        return sorted(found), failures

    def search_instances(
        self, study_uid: str, *, modalities: Sequence[str] = ()
    ) -> list[InstanceRef]:
        """The instances of one study, in series of the given modalities (all if none).

        Raises:
            DicomwebError: a request failed, a limit was passed, or a UID from the server
                is not a UID (`iter_instances` records such series and goes on).
        """
        refs, failures = self._study_instances(
            _check_uid(study_uid, "StudyInstanceUID"),
            {m.upper() for m in modalities},
            _Budget(self.limits.max_results),
        )
        if failures:
            raise DicomwebError(failures[0].reason)
        return refs

    def _study_instances(
        self, study_uid: str, wanted: set[str], budget: _Budget
    ) -> tuple[list[InstanceRef], list[SearchFailure]]:
        refs: list[InstanceRef] = []
        failures: list[SearchFailure] = []
        try:
            series_list = list(self._qido(f"studies/{study_uid}/series", {}, budget))
        except (DicomwebAborted, _SearchLimit):
            raise
        except DicomwebError as exc:
            return [], [SearchFailure(f"studies/{study_uid}", str(exc), study_uid)]
        for series in series_list:
            series_uid = _first(series, _SERIES_UID)
            modality = _first(series, _MODALITY)
            if not isinstance(series_uid, str):
                continue
            modality = modality if isinstance(modality, str) else None
            if wanted and (modality or "").upper() not in wanted:
                log.info(
                    "study %s series %s: modality %s not in %s, skipped",
                    self._shown(study_uid), self._shown(series_uid), repr((modality or "")[:16]),
                    ",".join(sorted(wanted)),
                )  # fmt: skip
                continue
            if not _is_uid(series_uid):
                failures.append(
                    SearchFailure(
                        f"studies/{study_uid}/series/{_invalid(series_uid)}",
                        _uid_error(series_uid, f"SeriesInstanceUID from {self.url}"),
                        study_uid,
                    )
                )
                continue
            path = f"studies/{study_uid}/series/{series_uid}"
            try:
                items = list(self._qido(f"{path}/instances", {}, budget))
            except (DicomwebAborted, _SearchLimit):
                raise
            except DicomwebError as exc:
                failures.append(SearchFailure(path, str(exc), study_uid))
                continue
            for item in items:
                sop_uid = _first(item, _SOP_UID)
                if not isinstance(sop_uid, str):
                    continue
                if not _is_uid(sop_uid):
                    failures.append(
                        SearchFailure(
                            f"{path}/instances/{_invalid(sop_uid)}",
                            _uid_error(sop_uid, f"SOPInstanceUID from {self.url}"),
                            study_uid,
                        )
                    )
                    continue
                sop_class = _first(item, _SOP_CLASS)
                refs.append(
                    InstanceRef(
                        study_uid,
                        series_uid,
                        sop_uid,
                        sop_class_uid=sop_class if isinstance(sop_class, str) else None,
                        modality=modality,
                    )
                )
        return sorted(refs), failures

    def iter_instances(
        self,
        *,
        study_uids: Sequence[str] = (),
        since: date | None = None,
        modalities: Sequence[str] = (),
    ) -> Iterator[InstanceRef | SearchFailure]:
        """Instances of the matching studies, study by study (QIDO-RS).

        A study or series whose listing fails, or a UID from the server that is not one,
        is yielded as a `SearchFailure` (before the study's instances) and the search goes
        on with the others.

        Raises:
            DicomwebError: the study search itself failed (unreachable server, refused
                credentials, a redirect), the search passed `max_results`, or the client
                was aborted (`DicomwebAborted`).
        """
        budget = _Budget(self.limits.max_results)
        wanted = {m.upper() for m in modalities}
        studies, failures = self._studies(study_uids, since, modalities, budget)
        yield from failures
        for study in studies:
            refs, failures = self._study_instances(study, wanted, budget)
            yield from failures
            yield from refs

    # ------------------------------------------------------------------ WADO-RS

    def retrieve_instance(self, ref: InstanceRef) -> bytes:
        """One instance as DICOM Part 10 bytes (WADO-RS, multipart/related).

        Raises:
            DicomwebError: HTTP failure, deadline passed, answer over `max_instance_bytes`,
                or an answer without exactly one DICOM part.
        """
        for uid, what in (
            (ref.study_instance_uid, "StudyInstanceUID"),
            (ref.series_instance_uid, "SeriesInstanceUID"),
            (ref.sop_instance_uid, "SOPInstanceUID"),
        ):
            _check_uid(uid, what)
        answer = self._exchange(
            "GET",
            ref.path,
            headers={"Accept": f'multipart/related; type="{_DICOM}"; transfer-syntax=*'},
            max_bytes=self.limits.max_instance_bytes,
            limit_name="CXR_DICOMWEB_MAX_INSTANCE_MB (--max-instance-mb)",
        )
        content_type = answer.headers.get("content-type", "")
        if content_type.lower().startswith(_DICOM):
            data = answer.body
        else:
            data = _single_part(content_type, answer.body, f"GET {self.url}/{ref.path}")
        log.info(
            "pulled study %s instance %s (%d bytes)",
            self._shown(ref.study_instance_uid), self._shown(ref.sop_instance_uid), len(data),
        )  # fmt: skip
        return data

    # ------------------------------------------------------------------ STOW-RS

    def store(self, instances: Iterable[bytes], *, study_uid: str | None = None) -> StoreOutcome:
        """Store DICOM Part 10 objects (STOW-RS, one multipart/related request).

        Returns:
            The UIDs stored and the ones the server refused (with its reason).

        Raises:
            DicomwebError: the request failed as a whole (HTTP error, no answer).
        """
        boundary = f"cxr-{uuid.uuid4().hex}"
        chunks: list[bytes] = []
        count = 0
        for data in instances:
            chunks += [
                f"--{boundary}\r\nContent-Type: {_DICOM}\r\n\r\n".encode(),
                data,
                b"\r\n",
            ]
            count += 1
        if not count:
            return StoreOutcome()
        chunks.append(f"--{boundary}--\r\n".encode())
        path = f"studies/{_check_uid(study_uid, 'StudyInstanceUID')}" if study_uid else "studies"
        try:
            answer = self._exchange(
                "POST",
                path,
                content=b"".join(chunks),
                headers={
                    "Content-Type": f'multipart/related; type="{_DICOM}"; boundary={boundary}',
                    "Accept": _JSON,
                },
                max_bytes=self.limits.max_json_bytes,
                limit_name="CXR_DICOMWEB_MAX_JSON_MB",
            )
        except DicomwebError:
            log.warning("STOW-RS %s/%s: %d objects NOT stored", self.url, path, count)
            raise
        outcome = self._store_outcome(answer)
        for uid in outcome.stored:
            log.info("pushed instance %s to %s", self._shown(uid), self.url)
        for uid, reason in outcome.failed.items():
            log.warning("push of instance %s to %s failed: %s", self._shown(uid), self.url, reason)
        return outcome

    def _store_outcome(self, answer: HttpAnswer) -> StoreOutcome:
        outcome = StoreOutcome()
        try:
            body = self._json(answer, f"POST {self.url}") if answer.body.strip() else {}
        except DicomwebError:
            return outcome
        if isinstance(body, list):  # some servers wrap the response dataset in an array
            body = body[0] if body else {}
        if not isinstance(body, dict):
            return outcome
        for key, into in ((_REFERENCED_SOPS, "stored"), (_FAILED_SOPS, "failed")):
            element = body.get(key)
            items = element.get("Value") if isinstance(element, dict) else None
            for item in items if isinstance(items, list) else []:
                if not isinstance(item, dict):
                    continue
                uid = _first(item, _REF_SOP_UID)
                if into == "stored":
                    if isinstance(uid, str):
                        outcome.stored.append(uid)
                    continue
                code = _first(item, _FAILURE_REASON)
                outcome.failed[str(uid)] = (
                    f"failure reason {code:#06x}"
                    if isinstance(code, int)
                    else "refused by the server"
                )
        return outcome


def _origin(location: str, base: str) -> str:
    try:
        target = urlsplit(str(httpx.URL(base).join(location))) if location else None
    except (httpx.InvalidURL, ValueError):
        target = None
    if target is None or not target.hostname:
        return "(no usable Location)"
    here = urlsplit(base)
    same = (target.hostname, target.port) == (here.hostname, here.port)
    port = f":{target.port}" if target.port else ""
    return f"{target.scheme}://{target.hostname}{port}" + (" (this server)" if same else "")


def _single_part(content_type: str, body: bytes, what: str) -> bytes:
    """The content of a one-part multipart/related body, copied once.

    Raises:
        DicomwebError: no boundary, a malformed body, or not exactly one part.
    """
    match = re.search(r'boundary="?([^";]+)"?', content_type, re.IGNORECASE)
    if not match:
        raise DicomwebError(
            f"{what}: multipart answer without a boundary (Content-Type {content_type[:120]!r})"
        )
    delimiter = b"--" + match.group(1).strip().encode()
    start = body.find(delimiter)
    if start < 0 or body.startswith(b"--", start + len(delimiter)):
        raise DicomwebError(f"{what}: expected one DICOM part, got 0")
    head_end = body.find(b"\r\n\r\n", start)
    end = body.find(delimiter, start + len(delimiter))
    if head_end < 0 or 0 <= end < head_end:
        raise DicomwebError(f"{what}: multipart answer: a part without a header/body separator")
    if end < 0:
        end = len(body)  # no close delimiter: take the rest (lenient, as before)
    elif not body.startswith(b"--", end + len(delimiter)):
        raise DicomwebError(f"{what}: expected one DICOM part, got more")
    content_end = end - 2 if body[end - 2 : end] == b"\r\n" else end
    return body[head_end + 4 : content_end]


def parse_multipart(content_type: str, body: bytes) -> list[tuple[dict[str, str], bytes]]:
    """Split a multipart/related body into (headers, content) parts.

    Raises:
        DicomwebError: no boundary in the Content-Type, or a malformed body.
    """
    match = re.search(r'boundary="?([^";]+)"?', content_type, re.IGNORECASE)
    if not match:
        raise DicomwebError(f"multipart answer without a boundary (Content-Type {content_type!r})")
    delimiter = b"--" + match.group(1).strip().encode()
    pieces = body.split(delimiter)
    parts: list[tuple[dict[str, str], bytes]] = []
    for piece in pieces[1:]:
        if piece.startswith(b"--"):  # the close delimiter
            break
        piece = piece[2:] if piece.startswith(b"\r\n") else piece
        head, sep, content = piece.partition(b"\r\n\r\n")
        if not sep:
            raise DicomwebError("multipart answer: a part without a header/body separator")
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.strip():
                headers[name.strip().lower()] = value.strip()
        # The CRLF before the next delimiter belongs to the delimiter (RFC 2046).
        parts.append((headers, content[:-2] if content.endswith(b"\r\n") else content))
    return parts
