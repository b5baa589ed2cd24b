"""The false-positive rate of the claims' seed-aware test, simulated on the claims' own spreads.

For each decided claim of results/claims.json: the spread of a run's score over seeds (pooled
over its two systems) and the earlier item-only test's standard error over items
(results/claims/previous.json) set a two-level model of two *identical* systems
(`attnmatch.research.claims_stats.simulate`); the rates of "A > B holds" (difference > 0 and
p < .05, nominal 2.5%) and of p < .05 are measured for the seed-aware test and for the earlier
item-only test, and written to results/claims/false_positives.json, which the claims page shows.

With --power, it adds the power instead: how often "A > B holds" when A is truly better by
+.02 (twice the margin), with 5 seeds and with 10, on each claim's spreads.

Run: python benchmarks/claims_false_positives.py [--reps 1000] [--power]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from attnmatch.research.claims_stats import Z975, Spread, simulate

COMMAND = "python benchmarks/claims_false_positives.py"


def spreads(results: Path) -> list[Spread]:
    claims = json.loads((results / "claims.json").read_text(encoding="utf-8"))["claims"]
    previous = json.loads((results / "claims" / "previous.json").read_text(encoding="utf-8"))
    out = []
    for r in claims:
        old = previous["claims"].get(f"{r['setting']}/{r['id']}")
        if r["verdict"] == "not run" or old is None:
            continue
        a, b = np.asarray(r["a"]["runs"]), np.asarray(r["b"]["runs"])
        pooled = np.sqrt((a.var(ddof=1) * (len(a) - 1) + b.var(ddof=1) * (len(b) - 1))
                         / (len(a) + len(b) - 2))  # fmt: skip
        low, high = old["diff_ci95"]
        out.append(Spread(r["id"], float(pooled), (high - low) / (2 * Z975), old["items"], len(a)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument("--power", action="store_true", help="add the power at +.02")
    args = parser.parse_args()
    if args.power:
        add_power(args.results, args.reps)
        return
    rates = {}
    for spread in spreads(args.results):
        rates[spread.claim] = simulate(spread, reps=args.reps, seed=0) | {
            "seed_sd": spread.seed_sd, "item_se": spread.item_se, "items": spread.items,
        }  # fmt: skip
        print(spread.claim, {k: round(v, 4) for k, v in rates[spread.claim].items()}, flush=True)
    summary = {}
    for test in ("new", "old"):
        holds = [r[f"{test}_holds"] for r in rates.values()]
        p05 = [r[f"{test}_p05"] for r in rates.values()]
        summary[test] = {
            "holds_mean": float(np.mean(holds)), "holds_max": float(np.max(holds)),
            "p05_mean": float(np.mean(p05)), "p05_max": float(np.max(p05)),
        }  # fmt: skip
    out = {"reps": args.reps, "spreads": len(rates), "seeds": 5, "command": COMMAND,
           **summary, "claims": rates}  # fmt: skip
    path = args.results / "claims" / "false_positives.json"
    path.write_text(json.dumps(out, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2))


SHIFT = 0.02


def add_power(results: Path, reps: int) -> None:
    """Adds {"power": ...} to results/claims/false_positives.json."""
    path = results / "claims" / "false_positives.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    power: dict[str, dict[str, float]] = {}
    for spread in spreads(results):
        power[spread.claim] = {}
        for seeds in (5, 10):
            rates = simulate(spread, reps=reps, seed=2, shift=SHIFT, seeds=seeds)
            power[spread.claim][str(seeds)] = rates["new_holds"]
        print(spread.claim, power[spread.claim], flush=True)
    data["power"] = {
        "shift": SHIFT, "reps": reps, "claims": power,
        **{f"mean_{s}": float(np.mean([p[str(s)] for p in power.values()])) for s in (5, 10)},
        **{f"min_{s}": float(np.min([p[str(s)] for p in power.values()])) for s in (5, 10)},
        **{f"max_{s}": float(np.max([p[str(s)] for p in power.values()])) for s in (5, 10)},
    }  # fmt: skip
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
