"""A small DICOMweb client: QIDO-RS search, WADO-RS instance retrieval, STOW-RS store.

    with DicomwebClient("http://pacs:8042/dicom-web", user="ai", password="...") as web:
        for ref in web.search_instances(since=date(2024, 1, 1), modalities=("CR", "DX")):
            data = web.retrieve_instance(ref)            # DICOM Part 10 bytes
        outcome = web.store([sr_bytes, gsps_bytes])       # STOW-RS

Every failure is a `DicomwebError` (a ValueError) naming the method, the URL (without
credentials), the HTTP status and the server's reason. Logs say what was searched,
pulled and pushed by UID and size, never patient names.
"""

from __future__ import annotations

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

__all__ = [
    "DicomwebClient",
    "DicomwebServer",
    "DicomwebError",
    "InstanceRef",
    "StoreOutcome",
    "redact_url",
]

log = logging.getLogger(__name__)

_DICOM = "application/dicom"
_JSON = "application/dicom+json"
_PAGE = 500  # QIDO results per request; servers cap pages, so results are paged
_UID = re.compile(r"^[0-9]+(\.[0-9]+)*$")

# DICOM JSON tags (PS3.18 F.2).
_STUDY_UID, _SERIES_UID, _SOP_UID = "0020000D", "0020000E", "00080018"
_SOP_CLASS, _MODALITY, _STUDY_DATE = "00080016", "00080060", "00080020"
_FAILED_SOPS, _REFERENCED_SOPS, _FAILURE_REASON = "00081198", "00081199", "00081197"
_REF_SOP_UID = "00081155"


class DicomwebError(ValueError):
    """A DICOMweb request failed: the message names the method, URL, status and reason."""


def redact_url(url: str) -> str:
    """The URL without user:password@, for logs and error messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


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


@dataclass
class StoreOutcome:
    """What a STOW-RS request stored: SOP Instance UIDs stored, and failed ones with reasons."""

    stored: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _first(item: dict[str, Any], tag: str) -> Any:
    values = (item.get(tag) or {}).get("Value") or []
    return values[0] if values else None


def _check_uid(uid: str, what: str) -> str:
    if not _UID.match(uid) or len(uid) > 64:
        raise DicomwebError(f"{what} {uid!r} is not a DICOM UID (digits and dots, at most 64)")
    return uid


@dataclass(frozen=True)
class DicomwebServer:
    """A configured DICOMweb server (URL and credentials), to open clients on demand."""

    url: str
    user: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)
    timeout: float = 60.0
    log_uids: bool = False

    def client(self) -> DicomwebClient:
        """A new client (the caller closes it)."""
        return DicomwebClient(
            self.url,
            user=self.user,
            password=self.password,
            token=self.token,
            timeout=self.timeout,
            log_uids=self.log_uids,
        )


class DicomwebClient:
    """DICOMweb (QIDO-RS, WADO-RS, STOW-RS) against one service root.

    Args:
        url: the service root, e.g. http://127.0.0.1:8042/dicom-web.
        user, password: HTTP basic auth.
        token: bearer token (instead of basic auth).
        timeout: seconds per request (connect, read, write).
        transport: an httpx transport (tests).
        log_uids: name studies and instances by UID in logs (False: counts and sizes only).

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
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        log_uids: bool = True,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise DicomwebError(
                f"DICOMweb URL {redact_url(url)!r} must be http(s)://host[:port]/path"
            )
        if token and (user or password):
            raise DicomwebError("give either --user/--password or --token, not both")
        if parts.username is not None:  # credentials in the URL: move them to the auth
            user, password = parts.username, parts.password or ""
        self.url = redact_url(url).rstrip("/")
        auth: httpx.Auth | None = None
        headers = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif user is not None:
            auth = httpx.BasicAuth(user, password or "")
        self._http = httpx.Client(auth=auth, headers=headers, timeout=timeout, transport=transport)
        self.timeout = timeout
        self.log_uids = log_uids

    def _shown(self, uid: str) -> str:
        # The service logs no identifying tags unless CXR_LOG_PATIENT_DATA is set.
        return uid if self.log_uids else "<uid>"

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

    # ------------------------------------------------------------------ requests

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = f"{self.url}/{path}"
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.TimeoutException:
            raise DicomwebError(
                f"{method} {url}: no answer within {self.timeout:g} s (timeout)"
            ) from None
        except httpx.HTTPError as exc:
            raise DicomwebError(f"{method} {url}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise DicomwebError(
                f"{method} {url}: HTTP {response.status_code} {response.reason_phrase}"
                f"{_reason(response)}"
            )
        return response

    def _qido(self, path: str, params: dict[str, str]) -> Iterator[dict[str, Any]]:
        offset = 0
        previous: list[Any] | None = None
        while True:
            page = params | {"limit": str(_PAGE), "offset": str(offset)}
            response = self._request("GET", path, params=page, headers={"Accept": _JSON})
            if response.status_code == 204 or not response.content.strip():
                return
            try:
                items = response.json()
            except ValueError:
                raise DicomwebError(
                    f"GET {self.url}/{path}: the answer is not DICOM JSON "
                    f"(Content-Type {response.headers.get('content-type')!r})"
                ) from None
            if not isinstance(items, list):
                raise DicomwebError(f"GET {self.url}/{path}: expected a JSON array of results")
            if items == previous:  # a server that ignores offset: stop, don't loop
                log.warning(
                    "QIDO-RS %s/%s: the server ignores offset; paging stopped", self.url, path
                )
                return
            yield from (i for i in items if isinstance(i, dict))
            if len(items) < _PAGE:
                return
            offset += len(items)
            previous = items

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
        """
        base: dict[str, str] = {"includefield": "00080061"}
        if since is not None:
            base["StudyDate"] = f"{since:%Y%m%d}-"
        # One query per UID and per modality: list matching of either is not supported
        # by every server (Orthanc's plugin among them), exact matching is.
        uid_params = [{"StudyInstanceUID": _check_uid(u, "StudyInstanceUID")} for u in study_uids]
        modality_params = [{"ModalitiesInStudy": m} for m in modalities]
        found: set[str] = set()
        for by_uid in uid_params or [{}]:
            for by_modality in modality_params or [{}]:
                for item in self._qido("studies", base | by_uid | by_modality):
                    uid = _first(item, _STUDY_UID)
                    if isinstance(uid, str):
                        found.add(uid)
        for uid in study_uids:
            if uid not in found:
                log.warning(
                    "study %s: not found on %s with the filters given", self._shown(uid), self.url
                )
        log.info("QIDO-RS %s: %d studies match", self.url, len(found))
        return sorted(found)

    def search_instances(
        self, study_uid: str, *, modalities: Sequence[str] = ()
    ) -> list[InstanceRef]:
        """The instances of one study, in series of the given modalities (all if none)."""
        _check_uid(study_uid, "StudyInstanceUID")
        wanted = {m.upper() for m in modalities}
        refs: list[InstanceRef] = []
        for series in self._qido(f"studies/{study_uid}/series", {}):
            series_uid = _first(series, _SERIES_UID)
            modality = _first(series, _MODALITY)
            if not isinstance(series_uid, str):
                continue
            if wanted and str(modality or "").upper() not in wanted:
                log.info(
                    "study %s series %s: modality %s not in %s, skipped",
                    self._shown(study_uid), self._shown(series_uid), modality,
                    ",".join(sorted(wanted)),
                )  # fmt: skip
                continue
            path = f"studies/{study_uid}/series/{_check_uid(series_uid, 'SeriesInstanceUID')}"
            for item in self._qido(f"{path}/instances", {}):
                sop_uid = _first(item, _SOP_UID)
                if isinstance(sop_uid, str):
                    refs.append(
                        InstanceRef(
                            study_uid,
                            series_uid,
                            sop_uid,
                            sop_class_uid=_first(item, _SOP_CLASS),
                            modality=modality,
                        )
                    )
        return sorted(refs)

    def iter_instances(
        self,
        *,
        study_uids: Sequence[str] = (),
        since: date | None = None,
        modalities: Sequence[str] = (),
    ) -> Iterator[InstanceRef]:
        """Instances of the matching studies, study by study (QIDO-RS)."""
        for study in self.search_studies(study_uids=study_uids, since=since, modalities=modalities):
            yield from self.search_instances(study, modalities=modalities)

    # ------------------------------------------------------------------ WADO-RS

    def retrieve_instance(self, ref: InstanceRef) -> bytes:
        """One instance as DICOM Part 10 bytes (WADO-RS, multipart/related).

        Raises:
            DicomwebError: HTTP failure, or an answer without exactly one DICOM part.
        """
        for uid, what in (
            (ref.study_instance_uid, "StudyInstanceUID"),
            (ref.series_instance_uid, "SeriesInstanceUID"),
            (ref.sop_instance_uid, "SOPInstanceUID"),
        ):
            _check_uid(uid, what)
        response = self._request(
            "GET",
            ref.path,
            headers={"Accept": f'multipart/related; type="{_DICOM}"; transfer-syntax=*'},
        )
        content_type = response.headers.get("content-type", "")
        if content_type.lower().startswith(_DICOM):
            parts = [response.content]
        else:
            parts = [body for _, body in parse_multipart(content_type, response.content)]
        if len(parts) != 1:
            raise DicomwebError(
                f"GET {self.url}/{ref.path}: expected one DICOM part, got {len(parts)}"
            )
        log.info(
            "pulled study %s instance %s (%d bytes)",
            self._shown(ref.study_instance_uid), self._shown(ref.sop_instance_uid),
            len(parts[0]),
        )  # fmt: skip
        return parts[0]

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
            response = self._request(
                "POST",
                path,
                content=b"".join(chunks),
                headers={
                    "Content-Type": f'multipart/related; type="{_DICOM}"; boundary={boundary}',
                    "Accept": _JSON,
                },
            )
        except DicomwebError:
            log.warning("STOW-RS %s/%s: %d objects NOT stored", self.url, path, count)
            raise
        outcome = _store_outcome(response)
        for uid in outcome.stored:
            log.info("pushed instance %s to %s", self._shown(uid), self.url)
        for uid, reason in outcome.failed.items():
            log.warning("push of instance %s to %s failed: %s", self._shown(uid), self.url, reason)
        return outcome


def _reason(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return f": {text[:300]}" if text else ""


def _store_outcome(response: httpx.Response) -> StoreOutcome:
    outcome = StoreOutcome()
    try:
        body = response.json() if response.content.strip() else {}
    except ValueError:
        return outcome
    if isinstance(body, list):  # some servers wrap the response dataset in an array
        body = body[0] if body else {}
    if not isinstance(body, dict):
        return outcome
    for item in (body.get(_REFERENCED_SOPS) or {}).get("Value") or []:
        uid = _first(item, _REF_SOP_UID)
        if isinstance(uid, str):
            outcome.stored.append(uid)
    for item in (body.get(_FAILED_SOPS) or {}).get("Value") or []:
        uid = _first(item, _REF_SOP_UID)
        code = _first(item, _FAILURE_REASON)
        outcome.failed[str(uid)] = (
            f"failure reason {code:#06x}" if isinstance(code, int) else ("refused by the server")
        )
    return outcome


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
