"""Mention verdicts -> one status per label, and the No Finding flag."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from labeler.schema import Label, Mention, Status

__all__ = ["aggregate", "is_no_finding"]

# Any positive mention wins, then uncertain, then negative (Wang et al. 2017, Sec. 3.1;
# the CheXpert labeler's aggregation).
_RANK: dict[str, int] = {"absent": 0, "negative": 1, "uncertain": 2, "positive": 3}


def aggregate(mentions: Iterable[Mention], labels: Sequence[Label]) -> dict[str, Status]:
    """Combine mention verdicts into a status per label.

    Args:
        mentions: every mention of one report (labels outside `labels` are ignored).
        labels: the labels to report, in output order.

    Returns:
        {label name: "positive" | "uncertain" | "negative" | "absent"} for every label.
    """
    out: dict[str, Status] = {lab.value: "absent" for lab in labels}
    for m in mentions:
        current = out.get(m.label)
        if current is not None and _RANK[m.status] > _RANK[current]:
            out[m.label] = m.status
    return out


def is_no_finding(mentions: Iterable[Mention]) -> bool:
    """True when no finding of any kind is positive or uncertain.

    Every mention counts: the 14 labels, whatever the label set, and the
    `Other` findings of the vocabulary (fracture, granuloma, scoliosis...).
    """
    return not any(m.status in ("positive", "uncertain") for m in mentions)
