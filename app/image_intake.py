"""The intake of every image route: the upload spooled to disk, checked, then decoded in a worker.

`POST /v1/images/predict` and `POST /v1/studies/ask` both take their image here:

    async with received_upload(request, tmp_dir) as upload:   # or form_upload(part)
        loaded = await decode_upload(request, inference, upload, display_size=..., ...)

An upload is never whole in memory (issue 18 item 13). Its decode waits for one of the
`CXR_MAX_CONCURRENT_DECODES` slots (`InferenceQueue.decode`) and runs in a decoding worker
process (`models.upload_decoding`, CXR_DECODE_IN_WORKERS, with CXR_DECODE_TIMEOUT_S), so a
file that crashes or hangs its decoder fails its own request, 422 `DecoderFailedError`, on
every route alike (issue 39: the study-question route had decoded in the service's threads).
The wait for a slot is bounded in all and per client address; an upload whose client
closed its connection while it waited is dropped undecoded, and one whose client closes
it while it decodes has its decoding worker killed (issue 42), so a slow codestream whose
sender leaves holds its slot no longer than that.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from fastapi import Request
from starlette.datastructures import UploadFile

from app.errors import EmptyUpload, UnsupportedMediaType
from app.media_types import media_type

if TYPE_CHECKING:
    from app.inference import InferenceQueue
    from models.image_pipeline import LoadedImage
    from models.predict import Predictor
    from models.upload_decoding import Cancellation, UploadDecoders

__all__ = ["RAW_IMAGE_TYPES", "Upload", "decode_upload", "form_upload", "received_upload"]

#: Media types a body may carry the image as, raw ("": none given; the decoder sniffs).
RAW_IMAGE_TYPES = frozenset(
    {
        "application/dicom",
        "application/octet-stream",
        "image/png",
        "image/jpeg",
        "image/tiff",
        "",
    }
)

_CHUNK = 1 << 20


@dataclass
class Upload:
    """An uploaded file, spooled to disk while it waits, never whole in memory.

    Attributes:
        file: positioned at its start; open while the request is served.
        name: the name it was sent under ("upload" for a raw body), for messages.
        size: bytes, at least one.
    """

    file: BinaryIO
    name: str
    size: int

    def digest(self) -> asyncio.Future[str]:
        """Start the upload's SHA-256 on a thread; await the future when it is needed.

        Read from a duplicate of the descriptor (`os.pread`: the position stays the
        decoder's), so it runs while the image is decoded and predicted, off the request's
        critical path (5-7 ms for a 10 MiB DICOM). A small multipart part still in memory
        is written out by `fileno()`; the duplicate is the thread's to close, since the
        upload's file may close, and its number be reused, before the thread is done.
        """
        own = os.dup(self.file.fileno())
        future = asyncio.get_running_loop().run_in_executor(None, _file_digest, own, self.size)
        future.add_done_callback(_retrieved)
        return future


def _file_digest(fd: int, size: int) -> str:
    """SHA-256 of a file's first `size` bytes, read with `os.pread`; closes `fd`."""
    try:
        digest = hashlib.sha256()
        offset = 0
        while offset < size:
            chunk = os.pread(fd, min(_CHUNK, size - offset), offset)
            if not chunk:
                break
            digest.update(chunk)
            offset += len(chunk)
        return digest.hexdigest()
    finally:
        os.close(fd)


def _retrieved(future: asyncio.Future[str]) -> None:
    """Mark an unawaited digest's error as seen (the request failed before needing it)."""
    if not future.cancelled():
        future.exception()


def _checked(file: BinaryIO, name: str) -> Upload:
    size = file.seek(0, os.SEEK_END)
    if size == 0:
        raise EmptyUpload("the uploaded file is empty")
    file.seek(0)  # also flushes what was written, for the digest's reads
    return Upload(file=file, name=name, size=size)


def form_upload(part: UploadFile) -> Upload:
    """A multipart part as an upload (Starlette spools a part above 1 MiB to disk).

    Raises:
        EmptyUpload: the part holds no bytes (422).
    """
    return _checked(part.file, part.filename or "upload")


@contextlib.asynccontextmanager
async def received_upload(request: Request, tmp_dir: Path) -> AsyncIterator[Upload]:
    """The request's image: the body itself (`RAW_IMAGE_TYPES`), or the multipart field
    `file`; spooled to an unnamed temporary file in `tmp_dir`, gone when the block ends.

    Raises:
        UnsupportedMediaType: another Content-Type (415).
        EmptyUpload: an empty body or file, or a form without `file` (422).
    """
    content_type = media_type(request.headers.get("content-type"))
    async with contextlib.AsyncExitStack() as stack:
        if content_type == "multipart/form-data":
            form = await request.form(max_files=1, max_fields=10)
            stack.push_async_callback(form.close)
            part = form.get("file")
            if not isinstance(part, UploadFile):
                raise EmptyUpload("multipart upload without a `file` field")
            yield form_upload(part)
        elif content_type in RAW_IMAGE_TYPES:
            tmp_dir.mkdir(parents=True, exist_ok=True)
            file = stack.enter_context(tempfile.TemporaryFile(dir=tmp_dir))  # noqa: SIM115
            async for chunk in request.stream():
                if chunk:
                    # Written from the event loop: page-cache writes of at most the
                    # server's read size (64 KiB), cheaper than a thread hop per chunk.
                    file.write(chunk)
            yield _checked(file, "upload")
        else:
            raise UnsupportedMediaType(
                f"Content-Type {content_type!r} is not accepted; send application/dicom "
                "(or image/png, image/jpeg) as the body, or multipart/form-data with a "
                "`file` field"
            )


async def decode_upload(
    request: Request,
    inference: InferenceQueue,
    upload: Upload,
    *,
    display_size: int,
    max_pixels: int | None,
) -> LoadedImage:
    """Decode an upload once a decode slot is free: the model input, the metadata and an
    8-bit display copy (longer side at most `display_size`).

    The decode runs in the service's decoding workers (`inference.decoders`), or in a
    thread here when there are none (CXR_DECODE_IN_WORKERS=false). The full-resolution
    image lives only inside it, so the request's peak memory is the decode itself.

    `request` (its body already read) names the client whose share of the queue the
    upload takes, and says when that client has gone.

    Raises:
        ImageError: (a subclass) unreadable, unsupported, over `max_pixels` (checked from
            the header, before decoding: 413); `DecoderFailedError` when the decoder
            crashed or ran past CXR_DECODE_TIMEOUT_S (422).
        DecodeQueueFull: too many uploads wait, in all or from this client (503).
        ClientGone: the client closed its connection while the upload waited or decoded
            (499).
    """

    async def gone() -> None:
        # The body has been read: what `receive` gives now is the client's disconnect.
        while (await request.receive())["type"] != "http.disconnect":
            pass

    cancellation = None
    if inference.decoders is not None:  # a worker can be killed; a thread cannot
        from models.upload_decoding import Cancellation

        cancellation = Cancellation()
    return await inference.decode(
        _load,
        inference.predictor,
        upload,
        display_size,
        max_pixels,
        inference.decoders,
        cancellation,
        client=request.client.host if request.client else "",
        gone=gone,
        cancel=cancellation.cancel if cancellation is not None else None,
    )


def _load(
    predictor: Predictor,
    upload: Upload,
    display_size: int,
    max_pixels: int | None,
    decoders: UploadDecoders | None,
    cancellation: Cancellation | None = None,
) -> LoadedImage:
    from models.image_pipeline import InputSpec, load_for_model

    spec = InputSpec.of(predictor, display_size=display_size, max_pixels=max_pixels)
    # Beside a GPU the shrink runs there (a 2500 x 2048 DICOM: 17.6 -> 13.8 ms on an H200).
    if decoders is not None:
        return decoders.load(upload.file, upload.name, spec, predictor.device, cancellation)
    return load_for_model(upload.file, spec, filename=upload.name, device=predictor.device)
