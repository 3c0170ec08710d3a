"""Why a report got its labels: every mention, the rule that fired, the aggregation.

`explain` rebuilds the reasoning from a `ReportLabels` and its label set, so
the CLI (`cxr label --explain`) and the API (`"explain": true`) share it
(issue 8, item 5). Users who tune the pattern files read it to see which rule,
cue or statement decided each mention.
"""

from __future__ import annotations

from typing import Any

from labeler.aggregate import implied
from labeler.labelsets import LabelSet
from labeler.schema import Mention, ReportLabels
from labeler.vocabulary import OTHER_LABEL

__all__ = ["explain"]

_ORDER = "positive > uncertain > negative"


def _why_mention(m: Mention) -> str:
    if m.rule is None:
        return "positive: no negation or uncertainty rule reaches this mention"
    if m.rule == "concept.hedged":
        return f"uncertain: {m.text!r} is a hedged phrase of {m.label} (at most uncertain)"
    if m.rule.startswith("implies."):
        return f"{m.status}: the label set says {m.text!r} implies {m.label} {m.status}"
    if m.cue is None:
        return f"{m.status}: statement {m.rule} ({m.text!r}) states it"
    return f"{m.status}: rule {m.rule} fired on the cue {m.cue!r}"


def _mention(i: int, m: Mention) -> dict[str, Any]:
    return {
        "index": i,
        "label": m.label,
        "text": m.text,
        "start": m.start,
        "end": m.end,
        "section": m.section,
        "status": m.status,
        "rule": m.rule,
        "cue": m.cue,
        "why": _why_mention(m),
    }


def explain(result: ReportLabels, label_set: LabelSet) -> dict[str, Any]:
    """The explanation of one result, as a JSON-ready dict.

    Args:
        result: a `label_report` result (a failed one explains its error).
        label_set: the label set that produced it.

    Returns:
        {"label_set", "mentions": [... with "rule", "cue" and "why"],
        "labels": {label: {"status", "mentions": [indices], "why"}}, "no_finding": why}.
    """
    if result.error is not None:
        return {"label_set": label_set.name, "error": result.error}
    mentions = [*result.mentions, *implied(result.mentions, label_set.implies)]
    listed = [_mention(i, m) for i, m in enumerate(mentions)]
    labels: dict[str, Any] = {}
    for label, status in result.labels.items():
        idx = [i for i, m in enumerate(mentions) if m.label == label]
        if not idx:
            why = "absent: no mention of this label in the labelled sections"
        else:
            counts = {
                s: sum(mentions[i].status == s for i in idx)
                for s in ("positive", "uncertain", "negative")
            }
            summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
            why = f"{status}: {summary} mention(s); {_ORDER}"
        labels[label] = {"status": status, "mentions": idx, "why": why}
    blocking = [
        i
        for i, m in enumerate(result.mentions)
        if m.status in ("positive", "uncertain") and m.label not in label_set.no_finding_ignores
    ]
    if result.no_finding:
        ignored = ", ".join(sorted(label_set.no_finding_ignores))
        nf = "true: no finding is positive or uncertain" + (
            f" (ignoring {ignored})" if ignored else ""
        )
    else:
        # name each finding that blocked it, with its words and rule: a reader can see
        # that "degenerative changes of the spine" is what made a normal chest not normal
        shown = []
        for i in blocking:
            m = result.mentions[i]
            label = (
                f"{m.label} (a finding outside the label set)"
                if m.label == OTHER_LABEL
                else m.label
            )
            shown.append(f'{label} "{m.text}" {m.status}, rule {m.rule or "concept.plain"}')
        nf = "false: " + "; ".join(dict.fromkeys(shown))
    return {
        "label_set": label_set.name,
        "mentions": listed,
        "labels": labels,
        "no_finding": {"value": result.no_finding, "mentions": blocking, "why": nf},
    }
