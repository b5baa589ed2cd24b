"""Print a multi-seed run's dev and test metrics (mean ± std) beside a reproduced table's row.

Usage (after `attnmatch train runs/tune/amvlstm_q/best.toml --seeds 1,2,3 -o runs/amvlstm_q_tuned`):

    python benchmarks/tuned_vs_table.py runs/amvlstm_q_tuned/summary.json \
        --table results/amvlstm_table3.json --row amvlstm_q
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

METRICS = ("map", "mrr", "ndcg@3", "ndcg@5")


def cell(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "n/a"
    return f"{stats['mean']:.4f} ± {stats['std']:.4f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("summary", type=Path, help="summary.json of `attnmatch train --seeds`")
    ap.add_argument("--table", type=Path, default=Path("results/amvlstm_table3.json"))
    ap.add_argument("--row", default="amvlstm_q")
    ap.add_argument("--label", default="tuned (best.toml)")
    args = ap.parse_args()
    summary = json.loads(args.summary.read_text(encoding="utf-8"))
    table = json.loads(args.table.read_text(encoding="utf-8"))
    row = next(r for r in table["rows"] if r["id"] == args.row)
    print(f"| run | split | {' | '.join(METRICS)} |")
    print(f"|---|---|{'---|' * len(METRICS)}")
    for label, dev, test in (
        (f"`{args.row}` row ({table['table']})", row.get("dev"), row.get("metrics")),
        (args.label, summary.get("dev"), summary.get("test")),
    ):
        for split, stats in (("dev", dev), ("test", test)):
            cells = " | ".join(cell((stats or {}).get(m)) for m in METRICS)
            print(f"| {label} | {split} | {cells} |")
    runs = summary["runs"]
    print()
    print("seeds:", summary["seeds"], "best epochs:", [r["best_epoch"] for r in runs])
    print("test map per seed:", [round(r["test"]["map"], 4) for r in runs])
    print("dev map per seed:", [round(r["dev"]["map"], 4) for r in runs])


if __name__ == "__main__":
    main()
