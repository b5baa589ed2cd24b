"""Distillation over several seeds (`attnmatch distill`): the runs, the teacher's and students'
speeds on one CPU thread, and the summary that holds them side by side (summary.json)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from attnmatch.atomic import write_text_atomic
from attnmatch.data.datasets import Split
from attnmatch.data.schema import Example
from attnmatch.devices import torch_threads
from attnmatch.floors import FLOOR_LEXICAL
from attnmatch.matcher import Matcher
from attnmatch.models import input_layer
from attnmatch.training.config import ExperimentConfig
from attnmatch.training.distillation import CACHE_FILE, DistillConfig, DistillResult, distill_splits

SPEED_PAIRS = 300  # pairs of the test (or dev) split each model scores for its pairs/s
SUMMARY_FILE = "summary.json"


def distill_seeds(
    config: ExperimentConfig,
    teachers: Sequence[Matcher],
    splits: tuple[Split, Split | None, Split | None],
    output: Path,
    options: DistillConfig,
    seeds: Sequence[int | None],
    *,
    console: Console,
    progress: bool = False,
    overwrite: bool = False,
    resume: bool = False,
) -> list[DistillResult]:
    """One distillation per seed (output/seed-<s>/ when seeds are given; None: the config's
    seed, in `output` itself), sharing the teacher's cached scores; the teacher is evaluated
    with the first. `overwrite` and `resume` as `distill_splits` takes them."""
    results: list[DistillResult] = []
    for seed in seeds:
        run_config = config if seed is None else config.with_overrides({"train": {"seed": seed}})
        results.append(
            distill_splits(
                run_config,
                teachers,
                splits,
                output if seed is None else output / f"seed-{seed}",
                options,
                console=console,
                progress=progress,
                overwrite=overwrite,
                resume=resume,
                cache=output / CACHE_FILE,
                evaluate_teacher=not results,
            )
        )
    return results


def new_text_pairs(examples: Sequence[Example], n: int) -> list[tuple[str, str]]:
    """Up to `n` pairs of `examples` in which no text appears twice: what speeds are measured
    on, the cost of scoring new text (a bi-encoder that meets a text again encodes it once,
    `Matcher.outputs`, so repeated texts would flatter it against an interaction model)."""
    seen: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for ex in examples:
        if ex.left in seen or ex.right in seen or ex.left == ex.right:
            continue
        seen.update((ex.left, ex.right))
        pairs.append((ex.left, ex.right))
        if len(pairs) == n:
            break
    return pairs


def pairs_per_second(
    matchers: dict[str, Matcher], pairs: Sequence[tuple[str, str]], *, rounds: int = 2
) -> dict[str, float]:
    """Each matcher's scoring speed on `pairs` on one CPU thread, in pairs/s: the rounds
    interleaved (teacher, student, teacher, ...) so that a busy machine slows all alike,
    the best round of each kept; texts are encoded inside the timing."""
    best = dict.fromkeys(matchers, 0.0)
    with torch_threads(1):
        for _ in range(rounds):
            for name, matcher in matchers.items():
                start = time.perf_counter()
                matcher.score(list(pairs))
                best[name] = max(best[name], len(pairs) / (time.perf_counter() - start))
    return best


def speeds(teacher: Matcher, model_dir: Path, split: Split) -> dict[str, float]:
    """One-thread pairs/s of the teacher, the student in `model_dir` and the lexical floors,
    side by side (interleaved), on `SPEED_PAIRS` pairs of new text of `split`: the teacher's
    cache of encoded texts (`Inputs.enable_cache`, filled while it labelled and was evaluated)
    is dropped first, or it would answer from memory."""
    pairs = new_text_pairs(split.examples, SPEED_PAIRS)
    if teacher.inputs is not None:  # texts it met while labelling and evaluating are not new
        teacher.inputs.disable_cache(input_layer(teacher.model))
    matchers = {"teacher": teacher, "student": Matcher.load(model_dir)}
    matchers |= {name: Matcher.from_lexical(name) for name in FLOOR_LEXICAL}
    return pairs_per_second(matchers, pairs)


def write_summary(
    output: Path, results: Sequence[DistillResult], pairs_per_s: dict[str, float]
) -> dict[str, Any]:
    """The teacher's metrics, the students' results, the floors and the speeds, written to
    output/summary.json (with the students of an earlier summary there: `_with_earlier_seeds`)
    and returned."""
    first = results[0]
    summary = {
        "teacher": first.teacher_metrics,
        "students": [r.to_dict() for r in results],
        "floors": first.floors,
        "pairs_per_s": {k: round(v, 1) for k, v in pairs_per_s.items()},
    }
    summary = _with_earlier_seeds(summary, output / SUMMARY_FILE)
    write_text_atomic(output / SUMMARY_FILE, json.dumps(summary, indent=2) + "\n")
    return summary


def _with_earlier_seeds(summary: dict[str, Any], file: Path) -> dict[str, Any]:
    """`summary` with the students of an earlier summary in the same folder that were not
    trained again (seeds added later: `--seeds 4,5` beside 1-3), when that summary is of the
    same teacher (equal teacher metrics) and their folders remain; its pairs/s are kept when
    none were measured (`--no-speed`)."""
    if not file.is_file():
        return summary
    try:
        earlier = json.loads(file.read_text())
    except (OSError, ValueError):
        return summary
    if not isinstance(earlier, dict) or earlier.get("teacher") != summary["teacher"]:
        return summary
    trained = {s["output_dir"] for s in summary["students"]}
    kept = [
        s
        for s in earlier.get("students", [])
        if s.get("output_dir") not in trained and Path(s.get("output_dir", "")).is_dir()
    ]
    students = sorted(kept + summary["students"], key=lambda s: _seed_order(s["output_dir"]))
    pairs_per_s = summary["pairs_per_s"] or earlier.get("pairs_per_s", {})
    return summary | {"students": students, "pairs_per_s": pairs_per_s}


def _seed_order(folder: str) -> tuple[int, str]:
    name = Path(folder).name
    number = name.removeprefix("seed-")
    return (int(number), folder) if number.isdigit() else (-1, folder)
