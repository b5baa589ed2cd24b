"""`attnmatch reproduce claims`: each paper's claims decided with seeds and a seed-aware test.

The claims live in `benchmarks/claims.toml`. A claim says that system A beats system B
(``relation = ">"``) or is at least as good (``">="``) on one metric; each system is a row of a
reproduced table ("TABLE:ROW"), so its recipe is that table's. Every system is trained once per
seed in every setting (the table's own inputs, or another input such as a frozen MiniLM), each
run selected on dev and evaluated once on test, and each run keeps its per-item test results
(`<run>/test_items.json`: each query's average precision, each pair's prediction).

Each system's results are kept in the repository, one gzip JSON file per system
(`results/claims/<setting>/<table>/<row>.json.gz`, `system_file`): written whenever its runs have
all finished, read when they are not under `runs/`. So `--no-train` decides every claim again
from a clone; when a system has neither, nothing is written and the missing files are named.

The decision, per claim and setting (`attnmatch.research.claims_stats`):

- each system's mean over seeds, with a 95% t-interval over seeds;
- the difference A - B of the means (for Pearson, of the seed-mean Pearsons, pair-weighted over
  sets for SemEval STS), its variance the seed part plus the item part (per-item results, or the
  earlier item-only interval of the same runs where those were not kept), a t test with the
  Welch degrees of freedom of the seed part, and its 95% interval;
- Holm's adjustment of p over the claims of one paper and setting;
- the verdict: for "A > B", *holds* when the difference is positive with Holm p < alpha, *does
  not hold* when the upper end of its interval is below `margin` (A is at best negligibly
  better), else *undecided*; for "A >= B", *does not hold* when the difference is negative with
  Holm p < alpha, *holds* when the lower end of its interval is above -`margin`, else
  *undecided*;
- beside it, the earlier item-only test (`paired_means`, `paired_pearson`: items averaged over
  seeds, a paired randomisation test and bootstrap over items) and its verdict.

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
from attnmatch.research import claims_stats
from attnmatch.research.claims_stats import t_interval
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
    # Which test files the paper's figure is on, in the paper's words, or why it is uncertain.
    paper_split: str = ""
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
    from rich.console import Console

    from attnmatch.devices import torch_threads
    from attnmatch.training.config import ExperimentConfig
    from attnmatch.training.trainer import train

    exp = ExperimentConfig.from_dict(config)
    console = Console(stderr=True, quiet=True)
    with torch_threads(threads):
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

SYSTEM_FORMAT = "attnmatch-claims-system/1"
MIN_TARGET_SEEDS = 3  # a target is met only by a model trained with this many seeds at least
PREVIOUS_FILE = "previous.json"  # the earlier item-only test's rows, by "setting/id"
FALSE_POSITIVES_FILE = "false_positives.json"  # `claims_stats.simulate` on the claims' spreads


def read_runs(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Each finished run's {"result", "items"}."""
    out = []
    for folder in folders:
        result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
        items = json.loads((folder / "test_items.json").read_text(encoding="utf-8"))
        out.append({"result": result, "items": items, "folder": str(folder)})
    return out


def system_file(results_dir: str | Path, setting: str, system: str) -> Path:
    """results/claims/<setting>/<table>/<row>.json.gz: a system's per-seed (and per-item)
    results, kept in the repository so that the claims are decided again from a clone."""
    from attnmatch.research.reproduce import inside

    table, row = split_system(system)
    return inside(results_dir, "claims", setting, table, f"{row}.json.gz")


def system_record(runs: list[dict[str, Any]], setting: str, system: str) -> dict[str, Any]:
    """A system file's content from its finished runs (`read_runs`)."""
    records = []
    for r in runs:
        metrics = r["result"]["metrics"]
        records.append(
            {
                "seed": metrics["experiment"]["train"]["seed"],
                "test": r["result"]["test"],
                "dev": r["result"].get("dev"),
                "commit": r["result"].get("commit") or "",
                "device": str(metrics.get("device", "")),
                "platform": str(metrics.get("environment", {}).get("platform", "")),
                "items": r["items"],
            }
        )
    return {"format": SYSTEM_FORMAT, "setting": setting, "system": system, "runs": records}


def write_system(path: Path, record: dict[str, Any]) -> None:
    """Writes a system file (gzip with no time stamp: the same content, the same bytes)."""
    import gzip

    from attnmatch.atomic import write_bytes_atomic
    from attnmatch.strict_json import dumps_json

    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, gzip.compress(dumps_json(record).encode("utf-8"), mtime=0))


def read_system(path: Path) -> dict[str, Any]:
    """A system file's content.

    Raises:
        ValueError: the file is damaged or not a system file (it is named).
    """
    import gzip
    import zlib

    try:
        record = json.loads(gzip.decompress(path.read_bytes()).decode("utf-8"))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not a readable claims system file ({e})") from e
    if not isinstance(record, dict) or record.get("format") != SYSTEM_FORMAT:
        raise ValueError(f"{path}: format is not {SYSTEM_FORMAT!r}")
    if not isinstance(record.get("runs"), list) or len(record["runs"]) < 2:
        raise ValueError(f"{path}: runs: at least 2 seeds are needed")
    return record


def load_system(
    spec: ClaimsSpec, setting: str, system: str, runs_dir: str | Path, results_dir: str | Path
) -> dict[str, Any] | None:
    """A system's record: from its runs when every seed has finished (with per-item results),
    else from its system file under `results_dir`; None when neither exists."""
    folders = [run_folder(runs_dir, setting, system, s) for s in spec.seeds]
    if all(finished(f) for f in folders):
        return system_record(read_runs(folders), setting, system) | {"source": "runs"}
    path = system_file(results_dir, setting, system)
    if path.is_file():
        return read_system(path)
    return None


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of results/claims/ ({} when it is absent)."""
    if not path.is_file():
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: not a JSON object ({e})") from e


def _system_summary(record: dict[str, Any], metric: str) -> dict[str, Any]:
    runs = record["runs"]
    values = [float(r["test"][metric]) for r in runs]
    low, high = t_interval(values)
    devs = [(r.get("dev") or {}).get(metric) for r in runs]
    known = [float(d) for d in devs if d is not None]
    dev_mean = float(np.mean(known)) if len(known) == len(devs) else record.get("dev_mean")
    return {
        "seeds": [r["seed"] for r in runs],
        "runs": values,
        "mean": float(np.mean(values)),
        "ci95": [low, high],
        "dev_mean": dev_mean,
        "commits": record.get("commits") or sorted({r.get("commit") or "" for r in runs}),
        "devices": record.get("devices") or sorted({r.get("device") or "" for r in runs}),
        "platforms": record.get("platforms") or sorted({r.get("platform") or "" for r in runs}),
        "per_item": all(r.get("items") for r in runs),
    }


def _item_matrix(claim: Claim, runs_a: list[Any], runs_b: list[Any]) -> list[np.ndarray]:
    """Each system's (S, N) per-seed per-item values of a metric that is a mean over items."""
    keys, _ = item_values(runs_a[0]["items"], claim.metric)
    out = []
    for runs in (runs_a, runs_b):
        rows = []
        for r in runs:
            k, v = item_values(r["items"], claim.metric)
            if k != keys:
                raise ValueError(f"{claim.id}: the runs were not tested on the same items")
            rows.append(v)
        out.append(np.array(rows))  # (S, N)
    return out


def _pearson_inputs(claim: Claim, runs_a: list[Any], runs_b: list[Any]) -> tuple[Any, ...]:
    """(predictions of A (S_A, N), of B (S_B, N), gold (N,), STS set names or None)."""
    gold = np.asarray(runs_a[0]["items"]["labels"])
    for r in runs_a + runs_b:
        if not np.array_equal(np.asarray(r["items"]["labels"]), gold):
            raise ValueError(f"{claim.id}: the runs were not tested on the same pairs")
    pa = np.array([r["items"]["predictions"] for r in runs_a])  # (S_A, N)
    pb = np.array([r["items"]["predictions"] for r in runs_b])  # (S_B, N)
    return pa, pb, gold, runs_a[0]["items"].get("groups")


def _with_items(claim: Claim, rec_a: Any, rec_b: Any, resamples: int) -> tuple[Any, Paired]:
    """(the seed-aware test, the earlier item-only test) from both systems' per-item results."""
    runs_a, runs_b = rec_a["runs"], rec_b["runs"]
    if claim.metric != "pearson":
        a, b = _item_matrix(claim, runs_a, runs_b)
        old = paired_means(a.mean(axis=0), b.mean(axis=0), resamples=resamples)
        return claims_stats.two_level_means(a, b), old
    pa, pb, gold, groups = _pearson_inputs(claim, runs_a, runs_b)
    return two_level_pearson(
        pa,
        pb,
        gold,
        groups,
        seeds_a=[r["test"][claim.metric] for r in runs_a],
        seeds_b=[r["test"][claim.metric] for r in runs_b],
        resamples=max(100, resamples // 5),
    )


def two_level_pearson(
    pa: np.ndarray,
    pb: np.ndarray,
    gold: np.ndarray,
    groups: Sequence[str] | None,
    *,
    seeds_a: Sequence[float],
    seeds_b: Sequence[float],
    resamples: int,
) -> tuple[claims_stats.SeedAware, Paired]:
    """(the seed-aware test, the item-only test) of (pair-weighted) Pearson of A minus B: the
    seed part from each seed's Pearson (`seeds_a`, `seeds_b`), the item part from the paired
    bootstrap over items (`paired_pearson`).

    Shape:
        pa, pb: ``(S_A, N)``, ``(S_B, N)`` predictions per seed; gold: ``(N,)``.
    """
    old = paired_pearson(pa, pb, gold, groups, resamples=resamples)
    seed_var, df = claims_stats.seed_part(seeds_a, seeds_b)
    item_var = ((old.high - old.low) / (2 * claims_stats.Z975)) ** 2  # bootstrap over items
    new = claims_stats.combine(
        old.diff, seed_var, df, item_var, old.items, "two-level (seeds, items)"
    )
    return new, old


def two_level_pearson_saved(
    a: Sequence[dict[str, Any]],
    b: Sequence[dict[str, Any]],
    seeds_a: Sequence[float],
    seeds_b: Sequence[float],
    *,
    resamples: int = 1000,
) -> claims_stats.SeedAware:
    """`two_level_pearson` from each seed's saved test items (test_items.json: its labels,
    predictions and groups) and each seed's Pearson.

    Raises:
        ValueError: the seeds were not tested on the same pairs.
    """
    gold = np.asarray(a[0]["labels"], dtype=np.float64)
    for items in [*a, *b]:
        if not np.array_equal(np.asarray(items["labels"], dtype=np.float64), gold):
            raise ValueError("the two systems' seeds were not tested on the same pairs")
    pa = np.array([items["predictions"] for items in a], dtype=np.float64)  # (S_A, N)
    pb = np.array([items["predictions"] for items in b], dtype=np.float64)  # (S_B, N)
    groups = a[0].get("groups")
    new, _ = two_level_pearson(
        pa, pb, gold, groups, seeds_a=seeds_a, seeds_b=seeds_b, resamples=resamples
    )
    return new


def decide(
    claim: Claim,
    rec_a: dict[str, Any],
    rec_b: dict[str, Any],
    *,
    previous: dict[str, Any] | None,
    resamples: int,
) -> dict[str, Any]:
    """The claim's row but its verdict (set after Holm's adjustment within its paper): both
    systems' summaries, the seed-aware test, and the earlier item-only test beside it (run on
    the per-item results when kept, else as recorded in `previous`)."""
    a, b = _system_summary(rec_a, claim.metric), _system_summary(rec_b, claim.metric)
    if a["per_item"] and b["per_item"]:
        new, old = _with_items(claim, rec_a, rec_b, resamples)
        earlier: dict[str, Any] | None = {
            "diff": old.diff, "diff_ci95": [old.low, old.high], "p": old.p, "items": old.items,
            "on": "these runs",
        }  # fmt: skip
    else:
        earlier = (
            {k: previous[k] for k in ("diff", "diff_ci95", "p", "items")} if previous else None
        )
        if earlier is not None:
            earlier["on"] = "these runs (as recorded)"
        item_var = claims_stats.recorded_item_part(*earlier["diff_ci95"]) if earlier else None
        items = earlier["items"] if earlier else 0
        new = claims_stats.seed_level(a["runs"], b["runs"], item_var, items)
    if earlier is not None:
        low, high = earlier["diff_ci95"]
        tested = Paired(earlier["diff"], low, high, earlier["p"], earlier["items"], "items")
        earlier["verdict"] = verdict(claim.relation, tested, 0.05, 0.01)  # its own alpha, margin
    return {
        "a": a,
        "b": b,
        "diff": new.diff,
        "diff_ci95": [new.low, new.high],
        "p": new.p,
        "se": new.se,
        "df": new.df,
        "seed_var": new.seed_var,
        "item_var": new.item_var,
        "items": new.items,
        "test": new.test,
        "earlier": earlier,
    }


def apply_holm(rows: list[dict[str, Any]], alpha: float, margin: float) -> None:
    """Sets each decided row's Holm-adjusted p (within its setting and paper) and verdict."""
    families: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if r["verdict"] != "not run":
            families.setdefault((r["setting"], r["paper"]), []).append(r)
    for family in families.values():
        for r, adjusted in zip(family, claims_stats.holm([r["p"] for r in family]), strict=True):
            r["p_holm"] = adjusted
            low, high = r["diff_ci95"]
            tested = Paired(r["diff"], low, high, adjusted, r["items"], r["test"])
            r["verdict"] = verdict(r["relation"], tested, alpha, margin)


def _described(system: str, metric: str) -> dict[str, Any]:
    """A system's name, label and the paper's value of `metric` (None when it has none)."""
    row = table_row(system)[1]
    return {"system": system, "label": row.label, "paper": row.paper.get(metric)}


def _claim_row(
    spec: ClaimsSpec,
    claim: Claim,
    setting: Setting,
    records: dict[str, dict[str, Any] | None],
    previous: dict[str, Any],
) -> dict[str, Any]:
    """A claim's row in `setting` ("not run", with why, when a system has no results)."""
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
    missing = [s for s in (claim.a, claim.b) if records.get(s) is None]
    if why or missing:
        row["verdict"] = "not run"
        row["why"] = why or f"no results for {', '.join(missing)}"
        row["missing"] = [] if why else missing
        return row
    rec_a, rec_b = records[claim.a], records[claim.b]
    assert rec_a is not None and rec_b is not None
    decided = decide(
        claim, rec_a, rec_b, previous=previous.get(f"{setting.name}/{claim.id}"),
        resamples=spec.resamples,
    )  # fmt: skip
    row["a"] |= decided.pop("a")
    row["b"] |= decided.pop("b")
    return row | decided | {"verdict": "undecided"}


def collect(
    spec: ClaimsSpec,
    runs_dir: str | Path,
    settings: Sequence[Setting] | None = None,
    results_dir: str | Path = "results",
) -> dict[str, Any]:
    """results/claims.json's content from each system's runs under `runs_dir`, or its system
    file under `results_dir/claims/` (`load_system`)."""
    previous = _read_json(Path(results_dir) / "claims" / PREVIOUS_FILE)
    rows = []
    for setting in settings or spec.settings:
        systems: dict[str, dict[str, Any] | None] = {}
        if not setting.not_run:
            for system in spec.systems():
                systems[system] = load_system(spec, setting.name, system, runs_dir, results_dir)
        for claim in spec.claims:
            rows.append(_claim_row(spec, claim, setting, systems, previous.get("claims", {})))
    apply_holm(rows, spec.alpha, spec.margin)
    return {
        "title": "Each paper's claims, decided with a seed-aware test",
        "seeds": list(spec.seeds),
        "alpha": spec.alpha,
        "margin": spec.margin,
        "resamples": spec.resamples,
        "settings": [
            {"name": s.name, "label": s.label, "inputs": s.inputs, "not_run": s.not_run}
            for s in spec.settings
        ],
        "claims": rows,
        "targets": targets(spec, rows, results_dir),
        "earlier_test": previous.get("test", ""),
        "false_positives": _read_json(Path(results_dir) / "claims" / FALSE_POSITIVES_FILE),
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
            if (
                isinstance(row, dict) and "id" in row
            ):  # a reproduced table's row, not another file's
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
                "above": bool(best and goal is not None and best["test"] > goal),
                # A target is met on MIN_TARGET_SEEDS seeds at least.
                "met": bool(
                    best
                    and goal is not None
                    and best["test"] > goal
                    and best["seeds"] >= MIN_TARGET_SEEDS
                ),  # fmt: skip
                "paper_split": t.paper_split,
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
        "*Generated by `attnmatch reproduce claims` from `results/claims.json` and the systems' "
        "results under `results/claims/`; do not edit. Method: "
        "[docs/claims.md](../docs/claims.md).*",
        "",
        f"Each system is a row of a reproduced table (`benchmarks/tables/`), trained with "
        f"{len(seeds)} seeds ({', '.join(map(str, seeds))}); each run's epoch is selected on "
        "dev and the test split is evaluated once. *A* and *B*: mean over seeds [95% t-interval "
        "over seeds]. *A - B*: the difference of the two means (for Pearson, of the seed-mean "
        "Pearsons, pair-weighted over sets for STS) with its 95% interval, and *p*, from the "
        "seed-aware test: a t test whose variance adds the part over seeds (each system's "
        "per-seed scores) and the part over test items (each item's seed-mean difference; "
        "*items (recorded)*: taken from the earlier bootstrap interval over items of the same "
        "runs, whose per-item results were not kept), with the Welch degrees of freedom of the "
        "seed part. *Holm*: p adjusted by Holm's step-down method over the claims of the same "
        "paper and setting.",
        "",
        f'**Verdicts.** A claim "A > B" *holds* when A - B > 0 with Holm p < {result["alpha"]}; '
        f"it *does not hold* when the interval's upper end is below {result['margin']} (A is at "
        'best negligibly better, or worse); otherwise it is *undecided*. A claim "A ≥ B" *does '
        f"not hold* when A - B < 0 with Holm p < {result['alpha']}, *holds* when the interval's "
        f"lower end is above -{result['margin']}, and is otherwise *undecided*. *Earlier*: the "
        f"earlier test's difference, interval, p and verdict on the same runs "
        f"({result.get('earlier_test') or 'none recorded'}).",
        "",
    ]
    lines += _render_false_positives(result.get("false_positives") or {})
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


def _render_false_positives(fp: dict[str, Any]) -> list[str]:
    """The simulated false-positive rates of both tests (results/claims/false_positives.json)."""
    if not fp:
        return []
    new, old = fp["new"], fp["old"]
    return [
        f"**False positives.** Simulated with two identical systems ({fp['reps']:,} draws for "
        f"each of the {fp['spreads']} claims' own spreads of seeds and items, {fp['seeds']} "
        f'seeds; `{fp["command"]}`): the seed-aware test says "A > B holds" in '
        f"{new['holds_mean']:.1%} of draws on average (at most {new['holds_max']:.1%} for one "
        f"claim's spreads; nominal 2.5%) and p < .05 in {new['p05_mean']:.1%}; the earlier "
        f'item-only test said "holds" in {old["holds_mean"]:.1%} (at most '
        f"{old['holds_max']:.1%}) and p < .05 in {old['p05_mean']:.1%}. Holm's adjustment only "
        "lowers these rates.",
        "",
    ] + _render_power(fp.get("power"))


def _render_power(power: dict[str, Any] | None) -> list[str]:
    """The simulated power of the seed-aware test (false_positives.json's "power")."""
    if not power:
        return []
    return [
        f"**Power.** The price: when A is truly better by {power['shift']:+.2f}, the test says "
        f'"A > B holds" (before Holm) in {power["mean_5"]:.0%} of draws on average over the '
        f"claims' spreads with 5 seeds ({power['min_5']:.0%} to {power['max_5']:.0%}), and in "
        f"{power['mean_10']:.0%} with 10 seeds ({power['min_10']:.0%} to {power['max_10']:.0%}; "
        f"{power['reps']:,} draws each, `python benchmarks/claims_false_positives.py --power`).",
        "",
    ]


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
            "| paper | claim | data (metric) | A | B | A - B [95%] | p | Holm | items | verdict "
            "| earlier: A - B [95%], p, verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            data = f"{r['dataset']} {r['splits'][2]} ({r['metric']})"
            if r["verdict"] == "not run":
                lines.append(
                    f"| {r['paper']} | {r['statement']} | {data} | {r['a']['label']} | "
                    f"{r['b']['label']} | — | — | — | — | not run: {r['why']} | — |"
                )
                continue
            lines.append(
                f"| {r['paper']} | {r['statement']} | {data} | {_cell(r['a'])} | "
                f"{_cell(r['b'])} | {_interval(r['diff'], r['diff_ci95'])} | {r['p']:.4f} | "
                f"{r['p_holm']:.4f} | {_items_word(r['test'])} | **{r['verdict']}** | "
                f"{_earlier(r.get('earlier'))} |"
            )
        lines.append("")
    return lines


def _interval(diff: float, ci: list[float]) -> str:
    return f"{diff:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]"


def _items_word(test: str) -> str:
    """How the item part of a row's test was obtained."""
    return "items (recorded)" if "record" in test else ("items" if "items" in test else "none")


def _earlier(e: dict[str, Any] | None) -> str:
    if not e:
        return "—"
    return f"{_interval(e['diff'], e['diff_ci95'])}, {e['p']:.4f}, {e['verdict']}"


def _render_targets(targets: list[dict[str, Any]]) -> list[str]:
    """The best model per benchmark, against its target."""
    lines = [
        "## Targets: the best attnmatch model per benchmark",
        "",
        "The best model is chosen by its dev mean among every reproduced row of `results/` "
        "(trained rows on the benchmark's standard splits) and the systems above; its test "
        "mean is reported once. *Zero-shot*: MiniLM (all-MiniLM-L6-v2, mean-pooled cosine) on "
        f"the same test files. A target is *met* only by a model trained with at least "
        f"{MIN_TARGET_SEEDS} seeds; a test mean above the target on fewer seeds is shown as "
        f"*above, N seed(s)*. *Paper's split*: which test files the paper's figure is on, in "
        "the paper's words, or why that is uncertain.",
        "",
        "| benchmark | metric | ours (dev-selected) | dev | test | seeds | paper | paper's split "
        "| zero-shot | target | met |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in targets:
        best = t["best"] or {}
        goal = _num(t["target"])
        if t["beat"]:
            goal += f" (`{t['beat']}`)"
        paper = _num(t["paper"]) + (f" ({t['paper_source']})" if t["paper_source"] else "")
        met = "**yes**" if t["met"] else "no"
        if t.get("above") and not t["met"]:
            met = f"above, {best.get('seeds')} seed{'s' if best.get('seeds') != 1 else ''}"
        lines.append(
            f"| {t['benchmark']} | {t['metric']} | {best.get('label', '—')} "
            f"(`{best.get('source', '—')}`) | {_num(best.get('dev'))} | "
            f"{_num(best.get('test'))} | {best.get('seeds', '—')} | {paper} | "
            f"{t.get('paper_split') or '—'} | {_num(t['zero_shot'])} | > {goal} | {met} |"
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
        _say_if_dirty(console)
        for setting in chosen:
            train_runs(
                spec, setting, runs_dir, systems=systems, jobs=jobs, threads=threads,
                device=device, console=console,
            )  # fmt: skip
    result = collect(spec, runs_dir, list(spec.settings), results_dir or "results")
    if results_dir is not None:
        _check_complete(spec, result, runs_dir, results_dir)
        export_systems(spec, runs_dir, results_dir)
        write_results(result, results_dir)
    return result


def _say_if_dirty(console: Console) -> None:
    from attnmatch.research.reproduce import say_if_dirty
    from attnmatch.training.run_dir import source_commit

    say_if_dirty(source_commit(), console)


def _check_complete(
    spec: ClaimsSpec, result: dict[str, Any], runs_dir: str | Path, results_dir: str | Path
) -> None:
    """ValueError naming what is missing when a claim of a run setting has no results: the
    committed results are then left as they are."""
    missing = sorted({(r["setting"], s) for r in result["claims"] for s in r.get("missing", [])})
    if not missing:
        return
    shown_ = [
        f"{system_file(results_dir, setting, system)} (or its {len(spec.seeds)} runs under "
        f"{run_folder(runs_dir, setting, system, spec.seeds[0]).parent})"
        for setting, system in missing[:3]
    ]
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    raise ValueError(
        f"{len(missing)} system(s) have no results: {'; '.join(shown_)}{more}; "
        f"nothing written under {results_dir}"
    )


def export_systems(spec: ClaimsSpec, runs_dir: str | Path, results_dir: str | Path) -> None:
    """Writes the system file of every system whose runs have all finished (per-item results
    included), for each setting that is run."""
    for setting in spec.settings:
        if setting.not_run:
            continue
        for system in spec.systems():
            folders = [run_folder(runs_dir, setting.name, system, s) for s in spec.seeds]
            if all(finished(f) for f in folders):
                record = system_record(read_runs(folders), setting.name, system)
                write_system(system_file(results_dir, setting.name, system), record)
