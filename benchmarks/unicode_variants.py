"""How many disguised spellings of "No pneumothorax." still negate (issue 42 M3).

The variants come from Unicode's tables as this checkout generated them
(`labeler/patterns/unicode.v1.yaml`): "N" or each letter that looks like N, followed by
"o" or each letter or zero-shaped digit that looks like o (every pair), and "No" with one
character of each Default_Ignorable_Code_Point range (its first and last) inside it. The
labeler is the one on PYTHONPATH, so the same variants measure another checkout:

    nice -n 10 env PYTHONPATH=. python benchmarks/unicode_variants.py
    nice -n 10 env PYTHONPATH=/work/base python benchmarks/unicode_variants.py
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def variants() -> list[str]:
    tables = yaml.safe_load((ROOT / "labeler/patterns/unicode.v1.yaml").read_text("utf-8"))
    letters = tables["letters"]
    n_like = ["N", *sorted(k for k, v in letters.items() if v == "N")]
    o_like = ["o", *sorted(k for k, v in letters.items() if v in "Oo"), *tables["zero_digits"]]
    hidden = sorted({chr(cp) for pair in tables["ignorable"] for cp in pair})
    return [n + o for n in n_like for o in o_like] + [f"N{h}o" for h in hidden]


def main() -> int:
    from labeler import label_report

    counts: Counter[str] = Counter()
    spellings = variants()
    for no in spellings:
        result = label_report(f"FINDINGS: {no} pneumothorax. Small left effusion.")
        counts[str(result.labels["Pneumothorax"])] += 1
    sys.stdout.write(
        f"{len(spellings)} spellings of 'No pneumothorax.': "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
