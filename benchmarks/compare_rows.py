"""Whether one reproduced row beats another, over seeds and test items together.

Reads two row folders of `attnmatch reproduce` (RUNS/<table>/<row>/seed-<s>/, each with its
test_items.json) and prints each seed's test metric and the seed-aware two-level test of
results/claims.md (`attnmatch.research.claims_stats.two_level_means`: the difference of the two
means, its 95% interval and p, with seeds and items as two levels of variation). Metrics that
are means over items (MAP, MRR, accuracy), or Pearson (`claims.two_level_pearson`: the item
part from a paired bootstrap over the test pairs, within each set where the protocol pools
several); the seeds each row finished are used (they need not be the same seeds: the rows are
independent systems).

    python benchmarks/compare_rows.py runs/modern/wikiqa-cross-encoder-segments \
        runs/modern/wikiqa-bi-encoder --metric map
    python benchmarks/compare_rows.py runs/modern/stsb-cross-encoder-gated \
        runs/modern/stsb-bi-encoder --metric pearson
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from attnmatch.research.claims_stats import two_level_means
from attnmatch.tasks import item_values


def seed_items(row: Path, metric: str) -> tuple[list[str], np.ndarray]:
    """The row's finished seeds and each seed's value on each test item: names, (S, N)."""
    seeds = sorted(p for p in row.glob("seed-*") if (p / "test_items.json").is_file())
    if not seeds:
        raise SystemExit(f"{row}: no seed-*/test_items.json (is it a finished row folder?)")
    keys: list[str] | None = None
    values = []
    for seed in seeds:
        items = json.loads((seed / "test_items.json").read_text(encoding="utf-8"))
        try:
            k, v = item_values(items, metric)
        except ValueError as e:
            raise SystemExit(f"{seed / 'test_items.json'}: {e}") from None
        order = np.argsort(k)
        if keys is None:
            keys = [k[i] for i in order]
        elif [k[i] for i in order] != keys:
            raise SystemExit(f"{seed}: its test items differ from {seeds[0]}'s")
        values.append(np.asarray(v, dtype=np.float64)[order])
    assert keys is not None
    return [p.name for p in seeds], np.stack(values)  # (S, N)


def seed_predictions(row: Path, metric: str) -> tuple[list[str], list[float], list[dict]]:
    """The row's finished seeds, each one's test metric (result.json) and saved test items."""
    seeds = sorted(p for p in row.glob("seed-*") if (p / "test_items.json").is_file())
    if not seeds:
        raise SystemExit(f"{row}: no seed-*/test_items.json (is it a finished row folder?)")
    values = [float(json.loads((p / "result.json").read_text())["test"][metric]) for p in seeds]
    items = [json.loads((p / "test_items.json").read_text(encoding="utf-8")) for p in seeds]
    return [p.name for p in seeds], values, items


def pearson_test(a: Path, b: Path) -> None:
    """Prints each seed's Pearson and the seed-aware test of A - B."""
    from attnmatch.research.claims import two_level_pearson_saved

    rows = {a: seed_predictions(a, "pearson"), b: seed_predictions(b, "pearson")}
    for row, (names, values, _) in rows.items():
        seeds = ", ".join(f"{n} {v:.4f}" for n, v in zip(names, values, strict=True))
        print(f"{'A' if row == a else 'B'} {row}: mean {np.mean(values):.4f} ({seeds})")
    if min(len(rows[a][0]), len(rows[b][0])) < 2:
        raise SystemExit("the seed-aware test needs at least 2 finished seeds in each row")
    try:
        test = two_level_pearson_saved(rows[a][2], rows[b][2], rows[a][1], rows[b][1])
    except ValueError as e:
        raise SystemExit(f"{a}, {b}: {e}") from None
    print(
        f"A - B = {test.diff:+.4f}, 95% interval [{test.low:+.4f}, {test.high:+.4f}], "
        f"p = {test.p:.3g} ({test.test}; {len(rows[a][0])} and {len(rows[b][0])} seeds, "
        f"{test.items} items, 1000 bootstrap resamples)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a", type=Path, help="the row folder of system A")
    parser.add_argument("b", type=Path, help="the row folder of system B")
    parser.add_argument(
        "--metric", default="map", help="a metric that is a mean over items, or pearson"
    )
    args = parser.parse_args(argv)
    if args.metric == "pearson":
        pearson_test(args.a, args.b)
        return
    names_a, a = seed_items(args.a, args.metric)
    names_b, b = seed_items(args.b, args.metric)
    if a.shape[1] != b.shape[1]:
        raise SystemExit(f"the rows were tested on different items ({a.shape[1]}, {b.shape[1]})")
    for label, names, values in (("A", names_a, a), ("B", names_b, b)):
        seeds = ", ".join(f"{n} {v:.4f}" for n, v in zip(names, values.mean(axis=1), strict=True))
        print(f"{label} {args.a if label == 'A' else args.b}: mean {values.mean():.4f} ({seeds})")
    if min(len(names_a), len(names_b)) < 2:
        raise SystemExit("the seed-aware test needs at least 2 finished seeds in each row")
    test = two_level_means(a, b)
    print(
        f"A - B = {test.diff:+.4f}, 95% interval [{test.low:+.4f}, {test.high:+.4f}], "
        f"p = {test.p:.3g} ({test.test}; {a.shape[0]} and {b.shape[0]} seeds, "
        f"{test.items} items, df {test.df:.1f})"
    )


if __name__ == "__main__":
    main()
