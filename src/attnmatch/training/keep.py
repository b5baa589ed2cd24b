"""Which model a run keeps in RUN/model: the trained one, or a floor that beats it on dev.

At the end of a run the no-training floors (`attnmatch.floors`) are scored on dev beside the
dev-selected trained model. Under train.keep = "best" (the default), when the best floor but
"random" (word overlap, BM25, IDF overlap, an encoder zero-shot) beats the trained model on the
selection metric, strictly, that floor is rebuilt as a model, calibrated as the floors were (on
the training pairs: `floors.floor_matcher`) and then on dev as a trained model is
(`Task.calibrated_on`: a ranking model's Platt scaling, a binary classifier's threshold), scored
on dev and test, and saved as RUN/model: a lexical floor as a lexical model folder
(`attnmatch.lexical_dir`), a zero-shot floor as an encoder folder. The trained model is moved
to RUN/trained-model. The run says in one line which model it kept and why, and records it in
metrics.json and result.json ("kept").

A distilled student is kept as trained: the distillation prints the floors beside it and
chooses among its own runs (`attnmatch.training.distillation`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from attnmatch.evaluation import report_from_outputs
from attnmatch.matcher import Matcher
from attnmatch.metrics import greater_is_better
from attnmatch.training.experiment import EvalSplit, Experiment
from attnmatch.training.loop import selection_metric
from attnmatch.training.run_dir import RunDir

STAGED_DIR = "floor-model"  # in a run folder: the kept floor, before it becomes model/


def keep_best(
    exp: Experiment,
    run: RunDir,
    dev: dict[str, float] | None,
    floors: dict[str, dict[str, float]],
    about: dict[str, Any],
) -> dict[str, Any] | None:
    """Keeps in `run.model_dir` the best on dev of the trained model (dev metrics `dev`) and
    the dev `floors` (module docstring). `about`: what the floor's metrics.json says of the
    data (dataset, fingerprints, protocols). Returns the record of the choice, with `line`
    to print; None when there is no dev split or no floor scored on the selection metric."""
    if dev is None or exp.dev is None:
        return None
    metric = selection_metric(exp)
    scored = {
        name: float(m[metric])
        for name, m in floors.items()
        if name != "random" and metric in m and math.isfinite(m[metric])
    }
    if not scored or not math.isfinite(dev[metric]):
        return None
    better = greater_is_better(metric)
    best = (max if better else min)(scored, key=lambda n: scored[n])
    trained, floor = float(dev[metric]), scored[best]
    record: dict[str, Any] = {
        "model": "trained",
        "metric": metric,
        "trained_dev": trained,
        "best_floor": best,
        "best_floor_dev": floor,
    }
    compared = f"dev {metric} {trained:.4f}; the best floor, {best}, {floor:.4f}"
    if not (floor > trained if better else floor < trained):
        return record | {"line": f"kept: the trained model in {run.model_dir} ({compared})"}
    if exp.distill is not None or exp.config.train.keep == "trained":
        why = "a distilled student" if exp.distill is not None else 'train.keep = "trained"'
        line = (
            f"kept: the trained model in {run.model_dir} ({why}), though the {best} floor "
            f"beats it on dev {metric}: {floor:.4f} against {trained:.4f}"
        )
        return record | {"line": line}
    try:
        matcher = floor_model(exp, best)
    except (ValueError, FileNotFoundError, ImportError) as e:
        line = (
            f"kept: the trained model in {run.model_dir}: the {best} floor beats it on dev "
            f"{metric} ({floor:.4f} against {trained:.4f}) but cannot be rebuilt as a model ({e})"
        )
        return record | {"line": line}
    scores = {"dev": _metrics(matcher, exp.dev)}
    if exp.test is not None:
        scores["test"] = _metrics(matcher, exp.test)
    kept = scores["dev"][metric]
    line = (
        f"kept: the {best} floor in {run.model_dir}: dev {metric} {kept:.4f} against the "
        f"trained model's {trained:.4f} (the trained model is in {run.trained_model_dir}; "
        'train.keep = "trained" or --keep-trained keeps it in model/)'
    )
    record |= {"model": best, "dev": scores["dev"], "test": scores.get("test"), "line": line}
    staged = run.path / STAGED_DIR
    matcher.save(staged, metrics=about | scores | {"floor": best, "kept": _plain(record)})
    run.keep_floor(staged)
    return record


def floor_model(exp: Experiment, name: str) -> Matcher:
    """The floor `name` as a model: calibrated on the training pairs as `compute_floors`
    calibrates it (under the dev protocol's primary metric), then on dev as a trained
    model is when it is selected (`Task.calibrated_on`, on the selection metric)."""
    from attnmatch.floors import floor_matcher

    assert exp.dev is not None
    task = exp.matcher.task
    matcher = floor_matcher(name, task, exp.fit_examples, metric=exp.dev.protocol.primary)
    outputs = matcher.outputs([(e.left, e.right) for e in exp.dev.examples])
    calibrated = matcher.task.calibrated_on(
        outputs, exp.dev.data.labels, metric=selection_metric(exp)
    )
    return dataclasses.replace(matcher, task=calibrated)


def _metrics(matcher: Matcher, split: EvalSplit) -> dict[str, float]:
    """The kept floor's metrics on `split`, under the split's protocol."""
    outputs = matcher.outputs([(e.left, e.right) for e in split.examples])
    return report_from_outputs(outputs, split.data, split.protocol, task=matcher.task).metrics


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    """The record as the floor's own metrics.json holds it (its metrics are beside it)."""
    return {k: v for k, v in record.items() if k not in ("dev", "test")}
