"""results/distill.md: teachers and their distilled seed-model students, beside the same students
trained on labels alone.

Generated from run folders: for each row, RUNS/<id>/distilled/ (`attnmatch distill --seeds`,
its summary.json and seed-<s>/) and RUNS/<id>/labels/ (`attnmatch train --seeds`, seed-<s>/),
with the zero-shot figures of results/modern.json. A row whose runs are missing is written
"not run" with its reason. Distilled and labels-only students are compared with the seed-aware
two-level test of results/claims.md (`attnmatch.research.claims_stats.two_level_means`: seeds
within each arm, then test items). Run folders are not in the repository: a row whose folder is
not on this machine keeps the figures the results/distill.json already written records
(`--fresh` to write only what is here).

    python -m attnmatch.research.distill_table --runs runs/distill --results results
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnmatch.atomic import write_text_atomic
from attnmatch.research.claims_stats import two_level_means
from attnmatch.tasks import item_values


@dataclass(frozen=True)
class Row:
    """A row: its run folder name, dataset label, metric, student, teacher, modern.json
    zero-shot row and the paper's best figure (the five seed papers; None where none reports
    it, or reports it under another protocol, e.g. STS2016's pair-weighted Pearson). `labels`:
    the row whose labels-only runs it shares (the same student, data and
    settings), when not its own."""

    id: str
    dataset: str
    metric: str
    student: str
    teacher: str
    zero_shot: str | None
    paper: float | None
    labels: str | None = None
    not_run: str | None = None  # why the row has no runs, when not NOT_RUN's reason


ZERO_SHOT, FINE_TUNED = "MiniLM zero-shot", "MiniLM bi-encoder, fine-tuned"
CROSS = "MiniLM cross-encoder, fine-tuned"
ROWS = (
    Row("wikiqa-amvlstm_q-glove", "WikiQA", "map", "aMV-LSTM (Q), GloVe 50d", ZERO_SHOT, "wikiqa-zero-shot", 0.743),
    Row("wikiqa-amvlstm_q-glove-ft", "WikiQA", "map", "aMV-LSTM (Q), GloVe 50d", FINE_TUNED, "wikiqa-zero-shot", 0.743, labels="wikiqa-amvlstm_q-glove"),
    Row("wikiqa-amvlstm_q-glove-feat", "WikiQA", "map", "aMV-LSTM (Q), GloVe 50d + exact-match features", FINE_TUNED, "wikiqa-zero-shot", 0.743),
    Row("wikiqa-amvlstm_q-wordpiece", "WikiQA", "map", "aMV-LSTM (Q), MiniLM word pieces", FINE_TUNED, "wikiqa-zero-shot", 0.743),
    Row("wikiqa-amvlstm_q-wordpiece-feat", "WikiQA", "map", "aMV-LSTM (Q), MiniLM word pieces + exact-match features", FINE_TUNED, "wikiqa-zero-shot", 0.743),
    Row("wikiqa-amvlstm_q-tstatic", "WikiQA", "map", "aMV-LSTM (Q), the teacher's static vectors, 20+20+20 candidates", FINE_TUNED, "wikiqa-zero-shot", 0.743),
    Row("trecqa-amvlstm_q-glove", "TrecQA (raw)", "map", "aMV-LSTM (Q), GloVe 50d", FINE_TUNED, "trecqa-zero-shot", 0.805),
    Row("sick-mpcnn_attention-glove", "SICK relatedness", "pearson", "attention MP-CNN, GloVe 50d", FINE_TUNED, "sick-zero-shot", None),
    Row("stsb-mpcnn_attention-glove", "STS Benchmark", "pearson", "attention MP-CNN, GloVe 50d", FINE_TUNED, "stsb-zero-shot", None),
    Row("stsb-amvlstm_q-glove", "STS Benchmark", "pearson", "aMV-LSTM (Q), GloVe 50d", FINE_TUNED, "stsb-zero-shot", None),
    Row("sts2015-mpcnn_attention-glove", "STS2015", "pearson", "attention MP-CNN, GloVe 50d", FINE_TUNED, "sts2015-zero-shot", 0.804),
    Row("sts2016-mpcnn_attention-glove", "STS2016", "pearson", "attention MP-CNN, GloVe 50d", FINE_TUNED, "sts2016-zero-shot", None),
    Row("msrp-amvlstm_q-glove", "MSRP", "accuracy", "aMV-LSTM (Q), GloVe 50d", FINE_TUNED, None, None),
    Row("msrp-mpcnn_attention-glove", "MSRP", "accuracy", "attention MP-CNN, GloVe 50d", CROSS, None, None),
    Row("sick-entailment-damm-glove", "SICK entailment", "accuracy", "DAMM, GloVe 50d", FINE_TUNED, None, None),
    Row("sick-entailment-damm-static", "SICK entailment", "accuracy", "DAMM, MiniLM static vectors", FINE_TUNED, None, None),
    Row("sick-entailment-damm-static-aug", "SICK entailment", "accuracy", "DAMM, MiniLM static vectors, 2x augmented pairs", FINE_TUNED, None, None, labels="sick-entailment-damm-static"),
)  # fmt: skip


@dataclass(frozen=True)
class OwnRow:
    """A run on one of examples/own_data's sets: RUNS_OWN/<folder>/ (`attnmatch distill` on
    `pairs:examples/own_data/<data>`), its metric, student and inputs, how it was run and its
    teacher (MiniLM zero-shot, or the default model `attnmatch train` fine-tuned on the set)."""

    folder: str
    data: str
    metric: str
    student: str
    how: str
    teacher: str = ZERO_SHOT


FEATURES = "--set overlap_features=true"
OWN_DEFAULT = "the default model, fine-tuned on the set"
OWN_ROWS = (
    OwnRow("distill_own/faq", "faq", "map", "aMV-LSTM (Q), GloVe 50d", "defaults"),
    OwnRow("distill_own_feat/faq", "faq", "map", "aMV-LSTM (Q), GloVe 50d", FEATURES),
    OwnRow("distill_own_wp/faq", "faq", "map", "aMV-LSTM (Q), MiniLM word pieces", "defaults"),
    OwnRow("distill_own_feat_wp/faq", "faq", "map", "aMV-LSTM (Q), MiniLM word pieces", FEATURES),
    OwnRow("distill_own/paraphrase", "paraphrase", "accuracy", "aMV-LSTM (Q), GloVe 50d", "defaults"),
    OwnRow("distill_own_feat/paraphrase", "paraphrase", "accuracy", "aMV-LSTM (Q), GloVe 50d", FEATURES),
    OwnRow("distill_own_wp/paraphrase", "paraphrase", "accuracy", "aMV-LSTM (Q), MiniLM word pieces", "defaults"),
    OwnRow("distill_own_feat_wp/paraphrase", "paraphrase", "accuracy", "aMV-LSTM (Q), MiniLM word pieces", FEATURES),
    OwnRow("distill_own_mpcnn/similarity", "similarity", "pearson", "attention MP-CNN, GloVe 50d", "defaults"),
    OwnRow("distill_own_mpcnn_feat/similarity", "similarity", "pearson", "attention MP-CNN, GloVe 50d", FEATURES),
    OwnRow("distill_own_mpcnn_wp/similarity", "similarity", "pearson", "attention MP-CNN, MiniLM word pieces", "defaults"),
    OwnRow("distill_own/similarity", "similarity", "pearson", "aMV-LSTM (Q), GloVe 50d", "--student amvlstm_q"),
    OwnRow("distill_own_x4/similarity", "similarity", "pearson", "aMV-LSTM (Q), GloVe 50d", "--student amvlstm_q --cross-pairs 4"),
    OwnRow("distill_own_feat/similarity", "similarity", "pearson", "aMV-LSTM (Q), GloVe 50d", f"--student amvlstm_q {FEATURES}"),
    OwnRow("distill_own_wp/similarity", "similarity", "pearson", "aMV-LSTM (Q), MiniLM word pieces", "--student amvlstm_q"),
    OwnRow("distill_own_feat_wp/similarity", "similarity", "pearson", "aMV-LSTM (Q), MiniLM word pieces", f"--student amvlstm_q {FEATURES}"),
    OwnRow("distill_own_ft/faq", "faq", "map", "aMV-LSTM (Q), MiniLM word pieces", "defaults", OWN_DEFAULT),
    OwnRow("distill_own_ft/paraphrase", "paraphrase", "accuracy", "aMV-LSTM (Q), MiniLM word pieces", "defaults", OWN_DEFAULT),
    OwnRow("distill_own_ft/similarity", "similarity", "pearson", "attention MP-CNN, MiniLM word pieces", "defaults", OWN_DEFAULT),
)  # fmt: skip


def collect_own(row: OwnRow, runs: Path) -> dict[str, Any] | None:
    """One own-data run's test figures beside its floors (None when the run is missing)."""
    file = runs / row.folder / "summary.json"
    if not file.is_file():
        return None
    summary = json.loads(file.read_text())
    chosen = summary["students"][0]
    floors = summary.get("floors", {}).get("test", {})
    return {
        "data": row.data,
        "metric": row.metric,
        "student": row.student,
        "how": row.how,
        "teacher_model": row.teacher,
        "teacher": summary["teacher"]["test"][row.metric],
        "student_test": chosen["test"][row.metric],
        "weight": chosen["weight"],
        "floors": {
            name: floors[name][row.metric] for name in ("overlap", "bm25") if name in floors
        },
    }


@dataclass(frozen=True)
class AblationCell:
    """One cell of the ablation: RUNS_ABLATION/<folder>/ (`attnmatch distill --seeds 1` with the
    fine-tuned teacher), its inputs, transfer set (the options that make it) and whether the
    student reads the exact-match features (`--set overlap_features=true`)."""

    folder: str
    dataset: str
    metric: str
    student: str
    inputs: str
    transfer: str
    lexical: bool


TSTATIC, FITTED, GLOVE = (
    "the teacher's static vectors",
    "the same, fitted to the training texts",
    "GloVe 50d",
)
SMALL, LARGE = "--candidates 5,5,0", "--candidates 20,20,20"
AUG0, AUG2 = "labelled pairs", "--augment 2"


def _ablation_cells() -> tuple[AblationCell, ...]:
    """WikiQA: aMV-LSTM (Q), candidates x features on the teacher's static vectors, and the
    vectors fitted to the training texts; STS Benchmark: attention MP-CNN, augmentation and
    features on the static vectors, and GloVe."""
    wikiqa = [
        ("static-5-5-0-lexoff", TSTATIC, SMALL, False),
        ("static-5-5-0-lexon", TSTATIC, SMALL, True),
        ("static-20-20-20-lexoff", TSTATIC, LARGE, False),
        ("static-20-20-20-lexon", TSTATIC, LARGE, True),
        ("fitted-5-5-0-lexoff", FITTED, SMALL, False),
    ]
    stsb = [
        ("static-aug0-lexoff", TSTATIC, AUG0, False),
        ("static-aug2-lexoff", TSTATIC, AUG2, False),
        ("static-aug0-lexon", TSTATIC, AUG0, True),
        ("glove-aug0-lexoff", GLOVE, AUG0, False),
        ("fitted-aug0-lexoff", FITTED, AUG0, False),
    ]
    return tuple(
        [
            AblationCell(f"wikiqa-{k}", "WikiQA", "map", "aMV-LSTM (Q)", i, t, x)
            for k, i, t, x in wikiqa
        ]
        + [
            AblationCell(f"stsb-{k}", "STS Benchmark", "pearson", "attention MP-CNN", i, t, x)
            for k, i, t, x in stsb
        ]
    )


ABLATION = _ablation_cells()


def collect_cell(cell: AblationCell, runs: Path) -> dict[str, Any] | None:
    """One ablation cell's dev and test figures (None when its run is missing)."""
    file = runs / cell.folder / "summary.json"
    if not file.is_file():
        return None
    summary = json.loads(file.read_text())
    chosen = summary["students"][0]
    return dataclasses.asdict(cell) | {
        "note": summary.get("note", ""),
        "dev": chosen["dev"][cell.metric],
        "test": chosen["test"][cell.metric],
        "weight": chosen["weight"],
        "train_pairs": chosen["train_pairs"],
        "teacher_seconds": chosen["teacher_seconds"],
    }


NOT_RUN = (
    "CPU time: no GPU was lent, and the 2-core machine trained the rows above first (a "
    "fine-tuned teacher, then three seeds of each student, distilled and on labels alone)"
)


def _seed_folders(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("seed-*") if (p / "test_items.json").is_file())


def _shared_seeds(distilled: Path, labels: Path) -> list[str]:
    """The seed folders (seed-<s>) both arms finished: a row compares the same seeds (a seed
    still training on one side is left out of both)."""
    names = {p.name for p in _seed_folders(labels)}
    return [p.name for p in _seed_folders(distilled) if p.name in names]


def _test_values(
    folder: Path, metric: str, names: list[str]
) -> tuple[list[float], dict[str, list[float]], list[dict[str, Any]]]:
    """Each seed's test metric (result.json or distill.json), each test item's value in each
    seed (items of every seed only; none for a metric that is no mean over items, such as
    Pearson) and each seed's test items as saved (test_items.json); seeds `names` only."""
    values: list[float] = []
    per_item: dict[str, list[float]] = {}
    saved: list[dict[str, Any]] = []
    seeds = [folder / name for name in names]
    for seed in seeds:
        result = seed / ("distill.json" if (seed / "distill.json").is_file() else "result.json")
        values.append(float(json.loads(result.read_text())["test"][metric]))
        items = json.loads((seed / "test_items.json").read_text())
        saved.append(items)
        try:
            keys, item = item_values(items, metric)
        except ValueError:  # e.g. Pearson: not a mean over items
            continue
        for k, v in zip(keys, item, strict=True):
            per_item.setdefault(k, []).append(float(v))
    return values, {k: v for k, v in per_item.items() if len(v) == len(seeds)}, saved


def _zero_shot(modern: dict[str, Any], row_id: str | None, metric: str) -> float | None:
    for row in modern.get("rows", []):
        if row["id"] == row_id:
            value = row["metrics"].get(metric)
            return float(value["mean"] if isinstance(value, dict) else value)
    return None


def collect_row(row: Row, runs: Path, modern: dict[str, Any]) -> dict[str, Any]:
    """One row's figures (or its "not run" reason)."""
    out: dict[str, Any] = {
        "id": row.id,
        "dataset": row.dataset,
        "metric": row.metric,
        "student": row.student,
        "teacher_model": row.teacher,
        "paper": row.paper,
        "zero_shot": _zero_shot(modern, row.zero_shot, row.metric),
    }
    distilled, labels = runs / row.id / "distilled", runs / (row.labels or row.id) / "labels"
    names = _shared_seeds(distilled, labels)
    if not names:
        return out | {"not_run": row.not_run or NOT_RUN}
    if not (distilled / "summary.json").is_file():  # `attnmatch distill` writes it last
        return out | {"not_run": "its distillation has not finished (no summary.json yet)"}
    d_values, d_items, d_saved = _test_values(distilled, row.metric, names)
    l_values, l_items, l_saved = _test_values(labels, row.metric, names)
    summary = json.loads((distilled / "summary.json").read_text())
    teacher = summary.get("teacher", {}).get("test", {}).get(row.metric)
    tried = {w for student in summary.get("students", []) for w in student.get("by_weight", {})}
    out.update(
        teacher=teacher,
        weights=sorted(tried, key=float),
        distilled=_mean_std(d_values),
        labels=_mean_std(l_values),
        pairs_per_s=summary.get("pairs_per_s", {}),
        per_seed={"seeds": names, "distilled": d_values, "labels": l_values},
    )
    shared = sorted(set(d_items) & set(l_items))
    if shared:
        a = np.array([d_items[k] for k in shared]).T  # (seeds, items)
        b = np.array([l_items[k] for k in shared]).T  # (seeds, items)
        test = two_level_means(a, b)
        out["paired"] = {"difference": test.diff, "p": test.p, "items": test.items}
        # every seed's value of every test item: the paired test recomputes from a clone
        out["test_items"] = {"keys": shared, "distilled": a.tolist(), "labels": b.tolist()}
    elif row.metric == "pearson" and len(d_values) > 1 and len(l_values) > 1:
        from attnmatch.research.claims import two_level_pearson_saved

        test = two_level_pearson_saved(d_saved, l_saved, d_values, l_values)
        out["paired"] = {"difference": test.diff, "p": test.p, "items": test.items}
    return out


def _mean_std(values: list[float]) -> dict[str, Any]:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"mean": statistics.fmean(values), "std": std, "seeds": len(values)}


def collect(
    runs: Path,
    results: Path,
    own_runs: Path | None = None,
    earlier: dict[str, Any] | None = None,
    ablation_runs: Path | None = None,
) -> dict[str, Any]:
    """Every row's figures; `own_runs` (default: the parent of `runs`) holds the own-data
    runs of `OWN_ROWS`. A row whose run folder is not here keeps its figures from `earlier`
    (the results/distill.json written before), its zero-shot figure read again: run folders
    are not part of the repository, so a machine that trained one row must not erase the
    others."""
    modern_file = results / "modern.json"
    modern = json.loads(modern_file.read_text()) if modern_file.is_file() else {}
    before = {r["id"]: r for r in (earlier or {}).get("distillation", []) if "not_run" not in r}
    rows = []
    for row in ROWS:
        if not (runs / row.id).exists() and row.id in before:
            rows.append(
                before[row.id] | {"zero_shot": _zero_shot(modern, row.zero_shot, row.metric)}
            )
        else:
            rows.append(collect_row(row, runs, modern))
    own_base = own_runs if own_runs is not None else runs.parent
    own_before = {_own_key(r): r for r in (earlier or {}).get("own_data", [])}
    own = []
    for own_row in OWN_ROWS:
        found = collect_own(own_row, own_base)
        if found is None:
            key = (own_row.data, own_row.student, own_row.how, own_row.teacher)
            found = own_before.get(key)
        if found is not None:
            own.append(found)
    cells_before = {c["folder"]: c for c in (earlier or {}).get("ablation", [])}
    ablation_base = ablation_runs if ablation_runs is not None else runs.parent / "ablation"
    cells = [collect_cell(c, ablation_base) or cells_before.get(c.folder) for c in ABLATION]
    return {"distillation": rows, "own_data": own, "ablation": [c for c in cells if c]}


def _own_key(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    teacher = entry.get("teacher_model", ZERO_SHOT)
    return entry["data"], entry["student"], entry["how"], teacher


def _num(value: Any) -> str:
    return "—" if value is None else f"{value:.3f}"


def render(data: dict[str, Any]) -> str:
    """results/distill.md from results/distill.json."""
    lines = [
        "# Distillation: seed attention models taught by MiniLM",
        "",
        "Generated by `python -m attnmatch.research.distill_table` from the run folders (a row "
        "whose folders are not on the machine keeps the figures results/distill.json records); "
        "do not edit. Test figures of the dev-selected students, mean ± std over seeds; the paired "
        "test is the seed-aware two-level test of results/claims.md (seeds, then test items; "
        "distilled minus labels-only). Pairs/s: one CPU thread, teacher and student measured side "
        "by side (interleaved) on up to 300 test pairs in which no text repeats (the cost of "
        "new text), on the shared 2-core machine (`benchmarks/distill_speed.py`).",
        "",
        "| dataset | metric | student | teacher | teacher's test | distilled | labels only | "
        "paired test | paper | zero-shot | pairs/s teacher / student |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["distillation"]:
        fixed = f"| {r['dataset']} | {r['metric']} | {r['student']} | {r['teacher_model']} |"
        tail = f" {_num(r['paper'])} | {_num(r['zero_shot'])} |"
        if "not_run" in r:
            lines.append(f"{fixed} not run | not run | not run | — |{tail} — |")
            continue
        paired = r.get("paired")
        test = "—" if paired is None else f"{paired['difference']:+.3f}, p = {paired['p']:.3g}"
        speeds = r["pairs_per_s"]
        speed = "— (not measured)"  # `attnmatch distill --no-speed`
        if "teacher" in speeds and "student" in speeds:
            speed = f"{speeds['teacher']:,.0f} / {speeds['student']:,.0f}"
        if "teacher onnx int8" in speeds:  # the teacher's fastest backend, timed beside
            speed += f" (teacher on ONNX int8: {speeds['teacher onnx int8']:,.0f})"
        cells = [_num(r["teacher"]), _cell(r["distilled"]), _cell(r["labels"]), test]
        lines.append(f"{fixed} {' | '.join(cells)} |{tail} {speed} |")
    reasons: dict[str, list[str]] = {}
    for r in data["distillation"]:
        if "not_run" in r:
            reasons.setdefault(r["not_run"], []).append(r["dataset"])
    lines += ["", *[f"Not run ({', '.join(rows)}): {why}." for why, rows in reasons.items()]]
    lines += _weights_line(data["distillation"])
    own = data.get("own_data", [])
    if own:
        lines += [
            "",
            "## Your own pairs: examples/own_data",
            "",
            "`attnmatch distill --teacher TEACHER --dataset pairs:examples/own_data/<set> "
            "--inputs <inputs>` and the options of the run column (TEACHER: `minilm-l6`, MiniLM "
            "zero-shot, or `runs/own/<set>/model`, the default model `attnmatch train --dataset "
            "pairs:examples/own_data/<set>` fine-tuned; the student: the task's default, "
            "attention MP-CNN for similarity and aMV-LSTM (Q) otherwise, unless `--student` "
            "names another; one seed; weights 0.5 and 1, the better on dev kept). Test figures; "
            "a student beats a floor when its figure is higher.",
            "",
            "| set | metric | student | run | teacher | teacher's test | student | word overlap "
            "| BM25 | beats both floors |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in own:
            floors = r["floors"]
            beats = all(r["student_test"] > v for v in floors.values()) and bool(floors)
            lines.append(
                f"| {r['data']} | {r['metric']} | {r['student']} | {r['how']} | "
                f"{r.get('teacher_model', ZERO_SHOT)} | {_num(r['teacher'])} | "
                f"{_num(r['student_test'])} | "
                f"{_num(floors.get('overlap'))} | {_num(floors.get('bm25'))} | "
                f"{'yes' if beats else 'no'} |"
            )
    return "\n".join(lines + _ablation_lines(data.get("ablation", []))) + "\n"


def _ablation_lines(cells: list[dict[str, Any]]) -> list[str]:
    """The ablation's section: one line a cell, dev and test of the dev-selected weight."""
    if not cells:
        return []
    lines = [
        "",
        "## Ablation: inputs x transfer set x exact-match features",
        "",
        "`attnmatch distill --teacher TEACHER --dataset DATA --student STUDENT --inputs INPUTS "
        "--weights 0.5 --seeds 1` with the options of the transfer-set column (TEACHER: the "
        "fine-tuned MiniLM bi-encoder of the table above; STUDENT: aMV-LSTM (Q) on WikiQA, "
        "attention MP-CNN on the STS Benchmark; INPUTS: `static:TEACHER`, `glove-6b-50d`, or "
        "the teacher's static vectors fitted to the training texts by "
        "`benchmarks/static_fit.py --save`, read as `static:FOLDER`), and "
        "`--set overlap_features=true` where the features column says yes. One seed a cell "
        "(seed 1): differences under about .015 are within the seed spread of the rows above.",
        "",
        "| dataset | student | inputs | transfer set | training pairs | exact-match features "
        "| dev | test |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['dataset']} | {c['student']} | {c['inputs']} | {c['transfer']} | "
            f"{c['train_pairs']:,} | {'yes' if c['lexical'] else 'no'} | {_num(c['dev'])} | "
            f"{_num(c['test'])} |"
        )
    notes = [f"- `{c['folder']}`: {c['note']}." for c in cells if c.get("note")]
    return lines + ([""] + notes if notes else [])


def _weights_line(rows: list[dict[str, Any]]) -> list[str]:
    """Which teacher weights each row's seeds tried (the better on dev kept per seed): the
    usual 0.5 and 1, and the rows that tried others."""
    usual = ["0.5", "1"]
    other = [r for r in rows if r.get("weights") and r["weights"] != usual]
    if not other:
        return []
    datasets = [r["dataset"] for r in other]

    def name(r: dict[str, Any]) -> str:  # a dataset with several such rows: each row's student
        return (
            f"{r['dataset']} ({r['student']})" if datasets.count(r["dataset"]) > 1 else r["dataset"]
        )

    said = "; ".join(f"{name(r)}: {' and '.join(r['weights'])} only" for r in other)
    return [
        "",
        f"Teacher weights tried by each seed (the better on dev kept): {' and '.join(usual)}, "
        f"except {said}.",
    ]


def _cell(block: dict[str, Any]) -> str:
    return f"{block['mean']:.3f} ± {block['std']:.3f} ({block['seeds']})"


def dumps_compact(value: Any, indent: int = 0) -> str:
    """JSON indented by 2 as `json.dumps(value, indent=2)` writes it, except that a list of
    numbers or strings (a row's per-seed and per-item test values) takes one line: the per-item
    values of a 4,927-pair split stay a few lines, not one line a value."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict) and value:
        items = [
            f"{inner}{json.dumps(k)}: {dumps_compact(v, indent + 2)}" for k, v in value.items()
        ]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
        items = [f"{inner}{dumps_compact(v, indent + 2)}" for v in value]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(value)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/distill"))
    parser.add_argument("--results", type=Path, default=Path("results"))
    parser.add_argument(
        "--ablation-runs", type=Path, default=None, help="default: RUNS/../ablation"
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="write only the rows whose run folders are here (others: not run)",
    )
    args = parser.parse_args(argv)
    written = args.results / "distill.json"
    earlier = None if args.fresh or not written.is_file() else json.loads(written.read_text())
    data = collect(args.runs, args.results, earlier=earlier, ablation_runs=args.ablation_runs)
    write_text_atomic(args.results / "distill.json", dumps_compact(data) + "\n")
    write_text_atomic(args.results / "distill.md", render(data))


if __name__ == "__main__":
    main()
