"""Mention verdicts -> one status per label, and the No Finding flag."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace

from labeler.labelsets import Implication
from labeler.schema import Mention, Status

__all__ = ["aggregate", "deciding_first", "implied", "is_no_finding"]

# Any positive mention wins, then uncertain, then negative (Wang et al. 2017, Sec. 3.1;
# the CheXpert labeler's aggregation).
_RANK: dict[str, int] = {"absent": 0, "negative": 1, "uncertain": 2, "positive": 3}


def aggregate(mentions: Iterable[Mention], labels: Sequence[str]) -> dict[str, Status]:
    """Combine mention verdicts into a status per label.

    Args:
        mentions: every mention of one report (labels outside `labels` are ignored).
        labels: the labels to report, in output order.

    Returns:
        {label name: "positive" | "uncertain" | "negative" | "absent"} for every label.
    """
    out: dict[str, Status] = {str(lab): "absent" for lab in labels}
    for m in mentions:
        current = out.get(m.label)
        if current is not None and _RANK[m.status] > _RANK[current]:
            out[m.label] = m.status
    return out


def deciding_first(
    mentions: Sequence[Mention], statuses: dict[str, Status], limit: int
) -> list[Mention]:
    """At most `limit` mentions, in report order, for a report's evidence.

    Each label's first mention with the status that decided it comes first, so the
    evidence for every label survives the cut; the rest fill up in report order. Real
    reports hold a few dozen mentions at most; the bound is for text that repeats a
    finding thousands of times, whose evidence would otherwise grow with each repeat
    (every mention carries its sentence).
    """
    if len(mentions) <= limit:
        return list(mentions)
    keep: set[int] = set()
    decided: set[str] = set()
    for i, m in enumerate(mentions):
        if m.label not in decided and statuses.get(m.label) == m.status:
            decided.add(m.label)
            keep.add(i)
    kept = sorted(keep)[:limit]
    rest = iter(i for i in range(len(mentions)) if i not in keep)
    kept.extend(next(rest) for _ in range(limit - len(kept)))
    return [mentions[i] for i in sorted(kept)]


def is_no_finding(mentions: Iterable[Mention], ignore: Collection[str] = ()) -> bool:
    """True when no finding of any kind is positive or uncertain.

    Every mention counts: the vocabulary's labels, whatever the label set, and
    its `Other` findings (fracture, granuloma, scoliosis...), except the labels
    in `ignore` (CheXpert: Support Devices).
    """
    return not any(
        m.status in ("positive", "uncertain") and m.label not in ignore for m in mentions
    )


def implied(mentions: Iterable[Mention], implies: Sequence[Implication]) -> list[Mention]:
    """Mentions implied by others: a positive or uncertain "CHF" also makes
    Cardiomegaly uncertain in CheXpert mode (the label set's `implies`).

    Returns:
        Copies of the implying mentions, relabelled, with rule `implies.<label>`.
    """
    if not implies:
        return []
    out = []
    for m in mentions:
        if m.status == "negative":
            continue
        text = " ".join(m.text.lower().split())
        for imp in implies:
            if text in imp.phrases:
                out.append(
                    replace(m, label=imp.label, status=imp.status, rule=f"implies.{imp.label}")
                )
    return out
