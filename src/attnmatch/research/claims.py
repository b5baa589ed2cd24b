"""`attnmatch reproduce claims`: each paper's claims decided with seeds and paired tests.

The claims live in `benchmarks/claims.toml`. A claim says that system A beats system B
(``relation = ">"``) or is at least as good (``">="``) on one metric; each system is a row of a
reproduced table ("TABLE:ROW"), so its recipe is that table's. Every system is trained once per
seed in every setting (the table's own inputs, or another input such as a frozen MiniLM), each
run selected on dev and evaluated once on test, and each run keeps its per-item test results
(`<run>/test_items.json`: each query's average precision, each pair's prediction).

The decision, per claim and setting:

- each system's mean over seeds, with a 95% t-interval over seeds;
- the paired difference A - B over the test items: for metrics that are means over items (MAP,
  MRR, accuracy), each item's value is first averaged over seeds; for Pearson, the statistic is
  the mean over seeds of Pearson(A) minus that of B (pair-weighted over sets for SemEval STS);
- its p-value by a paired randomisation test (the two systems' values, or predictions, swapped
  item by item; two-sided; `resamples` draws) and its 95% interval by the paired bootstrap over
  items (percentile; resampled within each STS set);
- the verdict: for "A > B", *holds* when the difference is positive with p < alpha, *does not
  hold* when the upper end of its interval is below `margin` (A is at best negligibly better),
  else *undecided*; for "A >= B", *does not hold* when the difference is negative with
  p < alpha, *holds* when the lower end of its interval is above -`margin`, else *undecided*.

Runs go to `runs/claims/<setting>/<table>/<row>/seed-<n>/`; finished runs (with result.json and
test_items.json) are reused, so an interrupted reproduction continues where it stopped, and runs
trained elsewhere can be copied in (only those two files are read).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from attnmatch import configs
from attnmatch.atomic import write_text_atomic
from attnmatch.tasks import item_values
from attnmatch.terminal import shown

RELATIONS = (">", ">=")
VERDICTS = ("holds", "does not hold", "undecided", "not run")


@dataclass(frozen=True, kw_only=True)
class Setting:
    name: str
    label: str
    # Replaces every system's inputs (e.g. a frozen transformer); empty: the table's own inputs.
    inputs: dict[str, Any] = field(default_factory=dict)
    # Why this setting is not run at all (compute, data); empty: it is run.
    not_run: str = ""

    def __post_init__(self) -> None:
        configs.check_name(self.name, "name")


@dataclass(frozen=True, kw_only=True)
class Claim:
    id: str
    paper: str
    statement: str
    a: str  # "TABLE:ROW"
    b: str
    metric: str
    relation: str = ">"
    note: str = ""
    # {setting: why this claim is not run in that setting}.
    not_run: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        configs.check_name(self.id, "id")
        if self.relation not in RELATIONS:
            raise configs.ConfigError(f"relation: {self.relation!r} is not one of {RELATIONS}")
        for side in (self.a, self.b):
            split_system(side)
        if self.a == self.b:
            raise configs.ConfigError(f"claim {self.id}: a and b are the same system {self.a!r}")


@dataclass(frozen=True, kw_only=True)
class Target:
    """A benchmark's target: the best attnmatch model on it (chosen on dev) against a number."""

    benchmark: str
    dataset: str
    test_split: str
    metric: str
    target: float | None = None  # the number to beat, or
    beat: str = ""  # "TABLE:ROW" whose test mean is that number
    paper: float | None = None
    paper_source: str = ""
    zero_shot: str = ""  # "TABLE:ROW" of MiniLM zero-shot on the same files
    candidates: tuple[str, ...] = ()  # only these "TABLE:ROW" rows (default: every row)

    def __post_init__(self) -> None:
        if (self.target is None) == (not self.beat):
            raise configs.ConfigError(f"{self.benchmark}: give either target or beat")


@dataclass(frozen=True, kw_only=True)
class ClaimsSpec:
    seeds: tuple[int, ...]
    settings: tuple[Setting, ...]
    claims: tuple[Claim, ...]
    targets: tuple[Target, ...] = ()
    notes: tuple[str, ...] = ()  # on how the runs were obtained, shown under the tables
    summary: str = ""  # what the verdicts say, shown above the tables
    alpha: float = 0.05
    margin: float = 0.01
    resamples: int = 10000

    def __post_init__(self) -> None:
        configs.check_seeds(self.seeds, "seeds")
        if len(self.seeds) < 2:
            raise configs.ConfigError("seeds: at least 2 seeds are needed for an interval")
        if not 0 < self.alpha < 1:
            raise configs.ConfigError(f"alpha: {self.alpha} is not in (0, 1)")
        if self.resamples < 100:
            raise configs.ConfigError(f"resamples: {self.resamples} is under 100")
        for what, items in (("settings", self.settings), ("claims", self.claims)):
            names = [str(getattr(x, "name", None) or getattr(x, "id", "")) for x in items]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise configs.ConfigError(f"{what}: {twice} given twice")

    def setting(self, name: str) -> Setting:
        for s in self.settings:
            if s.name == name:
                return s
        raise ValueError(f"unknown setting {name!r}; settings: {[s.name for s in self.settings]}")

    def systems(self) -> list[str]:
        """Every system of every claim, each once, in order of first use."""
        return list(dict.fromkeys(s for c in self.claims for s in (c.a, c.b)))


def split_system(system: str) -> tuple[str, str]:
    table, sep, row = system.partition(":")
    if not sep or not table or not row:
        raise configs.ConfigError(f"{system!r}: a system is TABLE:ROW, e.g. damm:sick-damm")
    configs.check_name(table, "table")
    configs.check_name(row, "row")
    return table, row


def find_claims(path: str | Path | None = None) -> Path:
    """benchmarks/claims.toml, searched upwards from the current folder, or `path`."""
    if path is not None:
        return Path(path)
    for folder in [Path.cwd(), *Path.cwd().parents]:
        candidate = folder / "benchmarks" / "claims.toml"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "benchmarks/claims.toml not found: run from the repository, or give --claims PATH"
    )


def load_claims(path: str | Path) -> ClaimsSpec:
    """The claims TOML at `path`, validated (every system's table and row exist).

    Raises:
        ConfigError: one line naming the file and the field.
    """
    path = Path(path)
    try:
        spec = configs.from_dict(ClaimsSpec, configs.load_toml(path))
        for system in spec.systems():
            table_row(system)
    except (configs.ConfigError, KeyError, FileNotFoundError, ValueError) as e:
        message = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        raise configs.ConfigError(f"{path}: {' '.join(message.split())}") from e
    return spec


def table_row(system: str) -> tuple[Any, Any]:
    """The (TableSpec, TableRow) of "TABLE:ROW"."""
    from attnmatch.research.reproduce import find_table, load_table

    table, row_id = split_system(system)
    spec = load_table(find_table(table))
    for row in spec.rows:
        if row.id == row_id:
            if row.not_run:
                raise configs.ConfigError(f"{system}: that row is not run ({row.not_run})")
            return spec, row
    raise configs.ConfigError(f"{system}: table {table} has no row {row_id!r}")


def experiment(system: str, setting: Setting) -> Any:
    """The ExperimentConfig of `system` in `setting`."""
    from attnmatch.inputs import merge_inputs
    from attnmatch.research.reproduce import experiment_for
    from attnmatch.training.config import ExperimentConfig

    spec, row = table_row(system)
    exp = experiment_for(spec, row)
    if not setting.inputs:
        return exp
    data = exp.to_dict()
    data["inputs"] = merge_inputs(data.get("inputs"), setting.inputs)
    return ExperimentConfig.from_dict(data)


def run_folder(runs_dir: str | Path, setting: str, system: str, seed: int) -> Path:
    from attnmatch.research.reproduce import inside

    table, row = split_system(system)
    return inside(runs_dir, "claims", setting, table, row, f"seed-{seed}")


def finished(folder: Path) -> bool:
    return (folder / "result.json").is_file() and (folder / "test_items.json").is_file()


# ------------------------------------------------------------------------------------ training


def _train_one(config: dict[str, Any], folder: str, threads: int) -> str:
    """One seed's run (in a worker process): trains or resumes `folder`."""
    import torch
    from rich.console import Console

    from attnmatch.training.config import ExperimentConfig
    from attnmatch.training.trainer import train

    torch.set_num_threads(threads)
    exp = ExperimentConfig.from_dict(config)
    console = Console(stderr=True, quiet=True)
    train(exp, folder, resume=True, progress=False, console=console)
    return folder


def pending_runs(
    spec: ClaimsSpec,
    setting: Setting,
    runs_dir: str | Path,
    systems: Sequence[str] | None = None,
) -> list[tuple[str, int, Path]]:
    """(system, seed, folder) of every run not finished yet, for the claims run in `setting`,
    system by system (in the order of `systems` when given)."""
    out = []
    needed = {s for c in spec.claims if setting.name not in c.not_run for s in (c.a, c.b)}
    for system in systems if systems is not None else spec.systems():
        if system not in needed:  # only in claims not run in this setting
            continue
        for seed in spec.seeds:
            folder = run_folder(runs_dir, setting.name, system, seed)
            if not finished(folder):
                out.append((system, seed, folder))
    return out


def train_runs(
    spec: ClaimsSpec,
    setting: Setting,
    runs_dir: str | Path,
    *,
    systems: Sequence[str] | None = None,
    jobs: int = 1,
    threads: int = 1,
    device: str | None = None,
    console: Console | None = None,
) -> None:
    """Trains every pending run of `setting`, `jobs` at a time (each with `threads` threads),
    on `device` (default: each table's, the CPU)."""
    console = console or Console(stderr=True)
    if setting.not_run:
        console.print(shown(f"setting {setting.name} not run: {setting.not_run}"), highlight=False)
        return
    pending = pending_runs(spec, setting, runs_dir, systems)
    if not pending:
        return
    configs_ = {system: experiment(system, setting).to_dict() for system in {p[0] for p in pending}}
    # The no-training floors are reporting only (and the encoder floor costs minutes of CPU).
    extra: dict[str, Any] = {"floors": "none"} | ({"device": device} if device else {})
    configs_ = {k: configs.merge(v, {"train": extra}) for k, v in configs_.items()}
    console.print(
        f"{setting.name}: {len(pending)} runs to train, {jobs} at a time", highlight=False
    )
    if jobs == 1:
        for system, seed, folder in pending:
            config = configs.merge(configs_[system], {"train": {"seed": seed}})
            _train_one(config, str(folder), threads)
            console.print(shown(f"done {folder}"), highlight=False)
        return
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {
            pool.submit(
                _train_one,
                configs.merge(configs_[system], {"train": {"seed": seed}}),
                str(folder),
                threads,
            ): folder
            for system, seed, folder in pending
        }
        failed = []
        for future in as_completed(futures):
            try:
                console.print(shown(f"done {future.result()}"), highlight=False)
            except Exception as e:  # one failed run must not lose the others
                failed.append(futures[future])
                console.print(shown(f"failed {futures[future]}: {e}"), highlight=False)
    if failed:
        raise RuntimeError(f"{len(failed)} run(s) failed, e.g. {failed[0]}")


# ------------------------------------------------------------------------------------ statistics


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """The 95% t-interval of the mean of `values` (at least 2)."""
    from statistics import fmean, stdev

    n = len(values)
    half = _T975[min(n - 1, len(_T975)) - 1] * stdev(values) / math.sqrt(n)
    m = fmean(values)
    return m - half, m + half


# Student t quantiles 0.975 for 1..30 degrees of freedom (beyond: 30's).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


@dataclass(frozen=True)
class Paired:
    """A paired comparison over test items."""

    diff: float
    low: float
    high: float
    p: float
    items: int
    test: str


def paired_means(a: np.ndarray, b: np.ndarray, *, resamples: int, seed: int = 0) -> Paired:
    """Paired randomisation test and bootstrap interval of mean(a - b).

    Args:
        a, b: each item's value (already averaged over seeds).

    Shape:
        a, b: ``(N,)``.
    """
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)  # (N,)
    n = len(d)
    rng = np.random.default_rng(seed)
    observed = float(d.mean())
    hits = 0
    boot = np.empty(resamples)
    for start in range(0, resamples, 1000):
        r = min(1000, resamples - start)
        signs = rng.integers(0, 2, size=(r, n)) * 2 - 1  # (r, N)
        hits += int((np.abs((signs * d).mean(axis=1)) >= abs(observed) - 1e-12).sum())
        idx = rng.integers(0, n, size=(r, n))  # (r, N)
        boot[start : start + r] = d[idx].mean(axis=1)
    low, high = np.percentile(boot, [2.5, 97.5])
    return Paired(
        observed, float(low), float(high), (hits + 1) / (resamples + 1), n, "randomisation"
    )


def _pearson_rows(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Pearson of each row of `pred` with the matching row of `gold`.

    Shape:
        pred, gold: ``(R, N)``; returns ``(R,)``.
    """
    p = pred - pred.mean(axis=1, keepdims=True)
    g = gold - gold.mean(axis=1, keepdims=True)
    den = np.sqrt((p * p).sum(axis=1) * (g * g).sum(axis=1))
    return np.where(den > 0, (p * g).sum(axis=1) / np.where(den > 0, den, 1.0), 0.0)


def _weighted_pearson(
    pred: np.ndarray, gold: np.ndarray, sets: list[np.ndarray], idx: np.ndarray
) -> np.ndarray:
    """Pair-weighted mean over sets of Pearson, per resample row of item indices `idx`.

    Shape:
        pred: ``(S, N)`` seeds' predictions; gold: ``(N,)``; idx: ``(R, N)`` item indices (each
        set's indices resampled within that set); returns ``(R,)``: mean over seeds.
    """
    total = sum(len(s) for s in sets)
    out = np.zeros(idx.shape[0])
    for members in sets:
        cols = idx[:, members]  # (R, n_set)
        g = gold[cols]  # (R, n_set)
        per_seed = [_pearson_rows(pred[s][cols], g) for s in range(pred.shape[0])]
        out += np.mean(per_seed, axis=0) * len(members) / total
    return out


def paired_pearson(
    a: np.ndarray,
    b: np.ndarray,
    gold: np.ndarray,
    groups: Sequence[str] | None,
    *,
    resamples: int,
    seed: int = 0,
) -> Paired:
    """Paired randomisation test and bootstrap interval of the difference of (pair-weighted)
    Pearson, each system's Pearson averaged over its seeds.

    Shape:
        a, b: ``(S_a, N)``, ``(S_b, N)`` predictions per seed; gold: ``(N,)``.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    gold = np.asarray(gold, dtype=np.float64)
    n = len(gold)
    names = list(groups) if groups is not None else ["all"] * n
    sets = [np.flatnonzero(np.asarray(names) == g) for g in dict.fromkeys(names)]
    identity = np.arange(n)[None, :]  # (1, N)
    observed = float(
        _weighted_pearson(a, gold, sets, identity)[0]
        - _weighted_pearson(b, gold, sets, identity)[0]
    )
    rng = np.random.default_rng(seed)
    hits = 0
    boot = np.empty(resamples)
    if a.shape[0] != b.shape[0]:
        raise ValueError("a Pearson randomisation test needs as many seeds on both sides")
    for start in range(0, resamples, 200):
        r = min(200, resamples - start)
        idx = np.empty((r, n), dtype=np.int64)
        for members in sets:
            idx[:, members] = members[rng.integers(0, len(members), size=(r, len(members)))]
        boot[start : start + r] = _weighted_pearson(a, gold, sets, idx) - _weighted_pearson(
            b, gold, sets, idx
        )
        swap = rng.integers(0, 2, size=(r, n)).astype(bool)  # (r, N): item's systems swapped
        stat = np.empty(r)
        for k in range(r):
            sa = np.where(swap[k], b, a)  # (S, N)
            sb = np.where(swap[k], a, b)
            stat[k] = (
                _weighted_pearson(sa, gold, sets, identity)[0]
                - _weighted_pearson(sb, gold, sets, identity)[0]
            )
        hits += int((np.abs(stat) >= abs(observed) - 1e-12).sum())
    low, high = np.percentile(boot, [2.5, 97.5])
    return Paired(
        observed, float(low), float(high), (hits + 1) / (resamples + 1), n, "randomisation"
    )


def verdict(relation: str, paired: Paired, alpha: float, margin: float) -> str:
    """holds / does not hold / undecided (the rules in the module's docstring)."""
    if relation == ">":
        if paired.diff > 0 and paired.p < alpha:
            return "holds"
        if paired.high < margin:
            return "does not hold"
        return "undecided"
    if paired.diff < 0 and paired.p < alpha:
        return "does not hold"
    if paired.low > -margin:
        return "holds"
    return "undecided"


# ------------------------------------------------------------------------------------ collecting


def read_runs(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Each finished run's {"result", "items"}."""
    out = []
    for folder in folders:
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        items = json.loads((folder / "test_items.json").read_text(encoding="utf-8"))
        out.append({"result": result, "items": items, "folder": str(folder)})
    return out


def _item_values(items: dict[str, Any], metric: str) -> tuple[list[str], np.ndarray]:
    """(item keys, each item's value of `metric`) for metrics that are means over items."""
    return item_values(items, metric)


def _system_summary(runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    values = [float(r["result"]["test"][metric]) for r in runs]
    low, high = t_interval(values)
    return {
        "seeds": [r["result"]["metrics"]["experiment"]["train"]["seed"] for r in runs],
        "runs": values,
        "mean": float(np.mean(values)),
        "ci95": [low, high],
        "dev_mean": float(np.mean([r["result"]["dev"][metric] for r in runs]))
        if runs[0]["result"].get("dev") and metric in runs[0]["result"]["dev"]
        else None,
        "commits": sorted({r["result"].get("commit") or "" for r in runs}),
        "devices": sorted({str(r["result"]["metrics"].get("device", "")) for r in runs}),
        "platforms": sorted(
            {str(r["result"]["metrics"].get("environment", {}).get("platform", "")) for r in runs}
        ),
    }


def decide(
    claim: Claim,
    runs_a: list[dict[str, Any]],
    runs_b: list[dict[str, Any]],
    *,
    alpha: float,
    margin: float,
    resamples: int,
) -> dict[str, Any]:
    """The claim's row: both systems' summaries, the paired test and the verdict."""
    kind = runs_a[0]["items"]["kind"]
    if claim.metric == "pearson":
        gold = np.asarray(runs_a[0]["items"]["labels"])
        for r in runs_a + runs_b:
            if not np.array_equal(np.asarray(r["items"]["labels"]), gold):
                raise ValueError(f"{claim.id}: the runs were not tested on the same pairs")
        pa = np.array([r["items"]["predictions"] for r in runs_a])  # (S, N)
        pb = np.array([r["items"]["predictions"] for r in runs_b])  # (S, N)
        paired = paired_pearson(
            pa, pb, gold, runs_a[0]["items"].get("groups"), resamples=max(100, resamples // 5)
        )
    else:
        keys, _ = _item_values(runs_a[0]["items"], claim.metric)
        per_seed = []
        for runs in (runs_a, runs_b):
            values = []
            for r in runs:
                k, v = _item_values(r["items"], claim.metric)
                if k != keys:
                    raise ValueError(f"{claim.id}: the runs were not tested on the same items")
                values.append(v)
            per_seed.append(np.mean(values, axis=0))  # (N,): each item averaged over seeds
        paired = paired_means(per_seed[0], per_seed[1], resamples=resamples)
    return {
        "kind": kind,
        "a": _system_summary(runs_a, claim.metric),
        "b": _system_summary(runs_b, claim.metric),
        "diff": paired.diff,
        "diff_ci95": [paired.low, paired.high],
        "p": paired.p,
        "items": paired.items,
        "test": paired.test,
        "verdict": verdict(claim.relation, paired, alpha, margin),
    }


def _described(system: str, metric: str) -> dict[str, Any]:
    """A system's name, label and the paper's value of `metric` (None when it has none)."""
    row = table_row(system)[1]
    return {"system": system, "label": row.label, "paper": row.paper.get(metric)}


def collect(
    spec: ClaimsSpec,
    runs_dir: str | Path,
    settings: Sequence[Setting] | None = None,
    results_dir: str | Path = "results",
) -> dict[str, Any]:
    """results/claims.json's content from the finished runs under `runs_dir`."""
    from attnmatch.training.trainer import environment

    rows = []
    for setting in settings or spec.settings:
        for claim in spec.claims:
            row: dict[str, Any] = {
                "id": claim.id,
                "paper": claim.paper,
                "statement": claim.statement,
                "relation": claim.relation,
                "metric": claim.metric,
                "setting": setting.name,
                "a": _described(claim.a, claim.metric),
                "b": _described(claim.b, claim.metric),
                "note": claim.note,
            }
            exp = experiment(claim.a, setting)
            row["dataset"] = exp.data.dataset
            row["splits"] = [exp.data.train_split, exp.data.dev_split, exp.data.test_split]
            why = setting.not_run or claim.not_run.get(setting.name, "")
            folders = {
                side: [run_folder(runs_dir, setting.name, system, s) for s in spec.seeds]
                for side, system in (("a", claim.a), ("b", claim.b))
            }
            missing = [f for fs in folders.values() for f in fs if not finished(f)]
            if why or missing:
                row["verdict"] = "not run"
                row["why"] = why or f"{len(missing)} of {2 * len(spec.seeds)} runs not trained"
                rows.append(row)
                continue
            decided = decide(
                claim,
                read_runs(folders["a"]),
                read_runs(folders["b"]),
                alpha=spec.alpha,
                margin=spec.margin,
                resamples=spec.resamples,
            )
            row["protocol"] = read_runs(folders["a"][:1])[0]["items"]["protocol"]
            row["a"] |= decided.pop("a")
            row["b"] |= decided.pop("b")
            rows.append(row | decided)
    return {
        "title": "Each paper's claims, decided with seeds and paired tests",
        "seeds": list(spec.seeds),
        "alpha": spec.alpha,
        "margin": spec.margin,
        "resamples": spec.resamples,
        "settings": [
            {"name": s.name, "label": s.label, "inputs": s.inputs, "not_run": s.not_run}
            for s in spec.settings
        ],
        "commit": environment()["commit"],
        "claims": rows,
        "targets": targets(spec, rows, results_dir),
        "notes": list(spec.notes),
        "summary": spec.summary,
    }


def _table_rows(results_dir: Path) -> dict[str, dict[str, Any]]:
    """Every reproduced row, as {"TABLE:ROW": row} (results/*.json but claims.json)."""
    rows: dict[str, dict[str, Any]] = {}
    for path in sorted(results_dir.glob("*.json")):
        if path.name == "claims.json":
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or "rows" not in data:
            continue
        for row in data["rows"]:
            rows[f"{data.get('table', path.stem)}:{row['id']}"] = row
    return rows


def _mean(block: dict[str, Any] | None, metric: str) -> float | None:
    value = (block or {}).get(metric)
    mean = value.get("mean") if isinstance(value, dict) else None
    return float(mean) if isinstance(mean, (int, float)) and math.isfinite(mean) else None


def _trained(row: dict[str, Any]) -> bool:
    train = (row.get("experiment") or {}).get("train") or {}
    return train.get("epochs", 1) != 0 and "zero-shot" not in row["id"]


def targets(
    spec: ClaimsSpec, claim_rows: list[dict[str, Any]], results_dir: str | Path
) -> list[dict[str, Any]]:
    """Each target's best model, chosen by its dev mean among the reproduced rows (trained, on
    standard splits, on the target's test files) and the claims' systems, with its test mean."""
    table_rows = _table_rows(Path(results_dir))
    out = []
    for t in spec.targets:
        pool: list[dict[str, Any]] = []
        for key, row in table_rows.items():
            data = (row.get("experiment") or {}).get("data") or {}
            if t.candidates and key not in t.candidates:
                continue
            if (data.get("dataset"), data.get("test_split")) != (t.dataset, t.test_split):
                continue
            if row.get("non_standard") or not _trained(row):
                continue
            dev, test = _mean(row.get("dev"), t.metric), _mean(row.get("metrics"), t.metric)
            if dev is not None and test is not None:
                pool.append(
                    {"source": key, "label": row["label"], "dev": dev, "test": test,
                     "seeds": len(row.get("seeds") or [])}
                )  # fmt: skip
        if not t.candidates:
            for r in claim_rows:
                if r["verdict"] == "not run" or r["metric"] != t.metric:
                    continue
                if (r["dataset"], r["splits"][2]) != (t.dataset, t.test_split):
                    continue
                for side in ("a", "b"):
                    s = r[side]
                    key = f"claims:{r['setting']}:{s['system']}"
                    if s.get("dev_mean") is not None and all(p["source"] != key for p in pool):
                        pool.append(
                            {"source": key, "label": s["label"], "dev": s["dev_mean"],
                             "test": s["mean"], "seeds": len(s["runs"])}
                        )  # fmt: skip
        best = max(pool, key=lambda p: p["dev"]) if pool else None
        goal = t.target
        if t.beat:
            goal = _mean((table_rows.get(t.beat) or {}).get("metrics"), t.metric)
        zero = _mean((table_rows.get(t.zero_shot) or {}).get("metrics"), t.metric)
        out.append(
            {
                "benchmark": t.benchmark,
                "dataset": t.dataset,
                "test_split": t.test_split,
                "metric": t.metric,
                "best": best,
                "candidates": len(pool),
                "target": goal,
                "beat": t.beat,
                "paper": t.paper,
                "paper_source": t.paper_source,
                "zero_shot": zero,
                "met": bool(best and goal is not None and best["test"] > goal),
            }
        )
    return out


def _short(commit: str) -> str:
    """A commit as recorded, its hash cut to 7 characters ("-dirty" kept)."""
    base, dirty, _ = commit.partition("-dirty")
    return base[:7] + dirty


def _cell(side: dict[str, Any]) -> str:
    paper = f" (paper {side['paper']:.3f})" if side.get("paper") is not None else ""
    low, high = side["ci95"]
    return f"{side['label']}: {_num(side['mean'])} [{_num(low)}, {_num(high)}]{paper}"


def _num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def render(result: dict[str, Any]) -> str:
    """results/claims.md from results/claims.json's content."""
    seeds = result["seeds"]
    lines = [
        f"# {result['title']}",
        "",
        "*Generated by `attnmatch reproduce claims` from `results/claims.json`; do not edit.*",
        "",
        f"Each system is a row of a reproduced table (`benchmarks/tables/`), trained with "
        f"{len(seeds)} seeds ({', '.join(map(str, seeds))}); each run's epoch is selected on "
        "dev and the test split is evaluated once. *A* and *B*: mean over seeds [95% t-interval "
        "over seeds]. *A - B*: the paired difference over the test items (queries for MAP, "
        "pairs for accuracy, each item's value averaged over seeds; for Pearson, the mean over "
        "seeds of each system's Pearson, pair-weighted over sets for STS) with its 95% paired "
        f"bootstrap interval; *p*: two-sided paired randomisation test ({result['resamples']:,} "
        f"draws; {result['resamples'] // 5:,} for Pearson).",
        "",
        f'**Verdicts.** A claim "A > B" *holds* when A - B > 0 with p < {result["alpha"]}; it '
        f"*does not hold* when the interval's upper end is below {result['margin']} (A is at "
        'best negligibly better, or worse); otherwise it is *undecided*. A claim "A ≥ B" *does '
        f"not hold* when A - B < 0 with p < {result['alpha']}, *holds* when the interval's lower "
        f"end is above -{result['margin']}, and is otherwise *undecided*.",
        "",
    ]
    if result.get("summary"):
        lines += [" ".join(result["summary"].split()), ""]
    lines += _render_settings(result)
    if result.get("notes"):
        lines += ["**Notes.**", ""] + [f"- {n}" for n in result["notes"]] + [""]
    if result.get("targets"):
        lines += _render_targets(result["targets"])
    decided = [r for r in result["claims"] if r["verdict"] != "not run"]
    if decided:
        lines += _render_runs(decided)
    return "\n".join(lines)


def _render_settings(result: dict[str, Any]) -> list[str]:
    """A section per inputs setting: a table of its claims and their verdicts."""
    lines: list[str] = []
    for setting in result["settings"]:
        rows = [r for r in result["claims"] if r["setting"] == setting["name"]]
        lines += [f"## Inputs: {setting['label']}", ""]
        if setting.get("not_run"):
            what = f"{len(rows)} claim{'s' if len(rows) != 1 else ''}, the same as above"
            lines += [f"Not run ({what}): {setting['not_run']}", ""]
            continue
        lines += [
            "| paper | claim | data (metric) | A | B | A - B [95%] | p | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            data = f"{r['dataset']} {r['splits'][2]} ({r['metric']})"
            if r["verdict"] == "not run":
                lines.append(
                    f"| {r['paper']} | {r['statement']} | {data} | {r['a']['label']} | "
                    f"{r['b']['label']} | — | — | not run: {r['why']} |"
                )
                continue
            a, b = r["a"], r["b"]
            lines.append(
                f"| {r['paper']} | {r['statement']} | {data} | {_cell(a)} | {_cell(b)} | "
                f"{r['diff']:+.3f} [{r['diff_ci95'][0]:+.3f}, {r['diff_ci95'][1]:+.3f}] | "
                f"{r['p']:.4f} | **{r['verdict']}** |"
            )
        lines.append("")
    return lines


def _render_targets(targets: list[dict[str, Any]]) -> list[str]:
    """The best model per benchmark, against its target."""
    lines = [
        "## Targets: the best attnmatch model per benchmark",
        "",
        "The best model is chosen by its dev mean among every reproduced row of `results/` "
        "(trained rows on the benchmark's standard splits) and the systems above; its test "
        "mean is reported once. *Zero-shot*: MiniLM (all-MiniLM-L6-v2, mean-pooled cosine) on "
        "the same test files.",
        "",
        "| benchmark | metric | ours (dev-selected) | dev | test | seeds | paper | zero-shot "
        "| target | met |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in targets:
        best = t["best"] or {}
        goal = _num(t["target"])
        if t["beat"]:
            goal += f" (`{t['beat']}`)"
        paper = _num(t["paper"]) + (f" ({t['paper_source']})" if t["paper_source"] else "")
        lines.append(
            f"| {t['benchmark']} | {t['metric']} | {best.get('label', '—')} "
            f"(`{best.get('source', '—')}`) | {_num(best.get('dev'))} | "
            f"{_num(best.get('test'))} | {best.get('seeds', '—')} | {paper} | "
            f"{_num(t['zero_shot'])} | > {goal} | {'**yes**' if t['met'] else 'no'} |"
        )
    lines.append("")
    return lines


def _render_runs(decided: list[dict[str, Any]]) -> list[str]:
    """Per system and setting: its seeds' test values, commits and devices."""
    lines = [
        "## Runs",
        "",
        "Per system and setting: the test values of its seeds, the commit(s) it was trained "
        "at and the device.",
        "",
        "| setting | system | seeds | test per seed | commit | device |",
        "|---|---|---|---|---|---|",
    ]
    seen = set()
    for r in decided:
        for side in ("a", "b"):
            s = r[side]
            key = (r["setting"], s["system"])
            if key in seen:
                continue
            seen.add(key)
            lines.append(
                f"| {r['setting']} | `{s['system']}` | {', '.join(map(str, s['seeds']))} | "
                f"{', '.join(f'{v:.4f}' for v in s['runs'])} | "
                f"{', '.join(_short(c) for c in s['commits'])} | {', '.join(s['devices'])} |"
            )
    lines.append("")
    return lines


def write_results(result: dict[str, Any], results_dir: str | Path = "results") -> None:
    from attnmatch.research.reproduce import inside
    from attnmatch.research.results_index import write_results_readme
    from attnmatch.strict_json import dumps_json

    write_text_atomic(inside(results_dir, "claims.json"), dumps_json(result, indent=2) + "\n")
    write_text_atomic(inside(results_dir, "claims.md"), render(result))
    write_results_readme(Path(results_dir))


def reproduce_claims(
    *,
    claims_file: str | Path | None = None,
    settings: Sequence[str] | None = None,
    systems: Sequence[str] | None = None,
    jobs: int = 1,
    threads: int = 1,
    device: str | None = None,
    runs_dir: str | Path = "runs",
    results_dir: str | Path | None = "results",
    train: bool = True,
    console: Console | None = None,
) -> dict[str, Any]:
    """Trains the claims' pending runs (unless `train` is False) and writes the results
    (unless `results_dir` is None)."""
    console = console or Console(stderr=True)
    spec = load_claims(find_claims(claims_file))
    chosen = [spec.setting(s) for s in settings] if settings else list(spec.settings)
    if systems is not None:
        unknown = sorted(set(systems) - set(spec.systems()))
        if unknown:
            raise ValueError(f"unknown system(s) {unknown}; systems: {spec.systems()}")
    if train:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        for setting in chosen:
            train_runs(
                spec, setting, runs_dir, systems=systems, jobs=jobs, threads=threads,
                device=device, console=console,
            )  # fmt: skip
    result = collect(spec, runs_dir, list(spec.settings), results_dir or "results")
    if results_dir is not None:
        write_results(result, results_dir)
    return result
