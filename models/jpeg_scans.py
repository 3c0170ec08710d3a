"""Count the scans of a JPEG codestream, undecoded, and refuse an implausible number.

A progressive JPEG is decoded scan by scan, each one a pass over the whole image, and
decoders accept a scan repeated thousands of times (libjpeg only warns): a 57 KB file of
2048x2048 decoded for 7-14 s, one of 0.66 MB (7000x7000) for over 300 s, as an upload or
as a DICOM frame alike. Encoders write 6 scans for a grey progressive image and 10 for a
colour one (libjpeg's `jpeg_simple_progression`), a baseline image one scan per component
at most; libjpeg-turbo's `djpeg -maxscans` and TurboJPEG's `TJPARAM_SCANLIMIT` exist
for this attack. `check_scans` counts Start-of-Scan markers by walking the marker
segments (their lengths skipped, entropy-coded data searched for the next marker), which
costs a fraction of a decode, and is called before any decoder by every intake: uploads
(`models.images.read_bitmap`) and DICOM encapsulated JPEG (`models.dicom`).
"""

from __future__ import annotations

import re

from models.errors import ImageTooComplexError

__all__ = ["MAX_SCANS_PER_FRAME", "check_scans", "count_scans"]

# Generous: ten times what libjpeg's progression script writes for a colour image.
MAX_SCANS_PER_FRAME = 100

# In entropy-coded data a 0xFF byte is followed by 0x00 (stuffing), by RST0-7 (D0-D7) or by
# more 0xFF (fill); anything else is the next marker.
_NEXT_MARKER = re.compile(rb"\xff+([^\x00\xd0-\xd7\xff])")
_SOS = 0xDA
_STANDALONE = frozenset({0xD8, 0xD9, 0x01})  # SOI, EOI, TEM: no length follows


def count_scans(data: bytes | bytearray | memoryview, stop_after: int | None = None) -> int:
    """Start-of-Scan markers in one or more concatenated JPEG codestreams.

    Args:
        data: the codestream(s); truncated data counts what is there.
        stop_after: stop counting once past this many (the caller only needs to know).

    Returns:
        The number of scans (at most `stop_after + 1` when it is given).
    """
    buffer = bytes(data)
    scans = 0
    pos = 0
    while True:
        found = _NEXT_MARKER.search(buffer, pos)
        if found is None:
            return scans
        marker = found.group(1)[0]
        pos = found.end()
        if marker in _STANDALONE:
            continue
        if pos + 2 > len(buffer):
            return scans
        # A segment's length covers itself; after SOS the entropy-coded data follows,
        # which the next search skips.
        pos += max(2, int.from_bytes(buffer[pos : pos + 2], "big"))
        if marker == _SOS:
            scans += 1
            if stop_after is not None and scans > stop_after:
                return scans


def check_scans(
    name: str,
    data: bytes | bytearray | memoryview,
    *,
    frames: int = 1,
    max_scans_per_frame: int = MAX_SCANS_PER_FRAME,
) -> None:
    """Refuse JPEG data with more scans than `max_scans_per_frame` per frame, undecoded.

    Args:
        name: the input, for the message.
        data: the JPEG codestream (all frames' fragments, for a DICOM).
        frames: frames the data holds.
        max_scans_per_frame: the limit.

    Raises:
        ImageTooComplexError: more scans than the limit.
    """
    limit = max_scans_per_frame * max(1, frames)
    scans = count_scans(data, stop_after=limit)
    if scans > limit:
        per = "" if frames <= 1 else f" for {frames} frames"
        raise ImageTooComplexError(
            f"{name}: the JPEG data holds more than {limit} scans{per} (encoders write 6 to "
            f"10 a frame; the limit is {max_scans_per_frame}): a decode-time bomb, refused "
            "before decoding. Re-encode the image as baseline JPEG or PNG."
        )
