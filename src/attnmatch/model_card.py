"""The model card: the README.md of every model directory, written from what the run knows.

`model_dir.write` (which `Matcher.save`, `attnmatch train` and every other writer of a model
directory go through) writes it, and `model_dir.write_metrics` writes it again when a run's
final metrics arrive, so that the card and metrics.json never disagree. The card is generated,
never edited by hand: what it says comes from config.json (model, inputs, task) and
metrics.json (data, recipe, seeds, dev and test metrics, floors, speed, environment).

The YAML header follows the Hugging Face Hub's model card metadata (`library_name`, `license`,
`tags`, `datasets`, `pipeline_tag`, and `model-index` with one result per evaluated split), so
that the folder can be uploaded as it is; every scalar is written as a JSON string or number,
which YAML reads unchanged. A field the run does not know is said to be unknown, never guessed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from attnmatch import __version__
from attnmatch.data.schema import Example
from attnmatch.tasks import TASKS, ClassificationTask, RankingTask, RegressionTask, Task, for_task

FILE = "README.md"
# Keyed by task class (`attnmatch.tasks.for_task`): the Hub's task for each attnmatch task (its
# `pipeline_tag` and model-index task type), and what a model of it is for.
HUB_TASK: dict[type[Task], str] = {
    RankingTask: "text-ranking",
    ClassificationTask: "text-classification",
    RegressionTask: "sentence-similarity",
}
USE: dict[type[Task], str] = {
    RankingTask: "rank candidate texts (answers, passages) for a query",
    ClassificationTask: "decide whether two texts match (e.g. paraphrase, duplicate)",
    RegressionTask: "score how similar two texts are, on the training data's scale",
}
_RECIPE_KEYS = (
    "epochs",
    "batch_size",
    "lr",
    "optimizer",
    "loss",
    "negatives",
    "num_negatives",
    "weight_decay",
    "warmup",
    "lr_schedule",
    "patience",
    "seed",
    "precision",
)


def fingerprint(examples: Sequence[Example]) -> dict[str, Any]:
    """A split as the card names it: its pairs, its groups and a SHA-256 of its rows as read
    (group, left, right, label; one line each, in order), the same whatever file format held
    them."""
    digest = hashlib.sha256()
    for ex in examples:
        row = [ex.group if ex.group is not None else ex.left, ex.left, ex.right, ex.label]
        digest.update((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
    groups = len({ex.group if ex.group is not None else ex.left for ex in examples})
    return {"pairs": len(examples), "groups": groups, "sha256": digest.hexdigest()}


def render(header: dict[str, Any], metrics: dict[str, Any] | None) -> str:
    """The card of a model directory from its config.json `header` and its `metrics`."""
    metrics = metrics or {}
    facts = _facts(header, metrics)
    sections = [
        _yaml(_metadata(facts, metrics)),
        f"# {facts['name']}\n\n{_summary(facts)}",
        _model_section(header, facts),
        _data_section(facts, metrics),
        _recipe_section(metrics),
        _results_section(metrics),
        _speed_section(metrics),
        _use_section(facts),
    ]
    return "\n\n".join(s.rstrip("\n") for s in sections) + "\n"


def _facts(header: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """What the card says more than once: names, task, paper, data and its licence."""
    from attnmatch.models import get_model_entry

    experiment = metrics.get("experiment") or {}
    model_type = str(header.get("model_type", "unknown"))
    try:
        paper = get_model_entry(model_type).paper or "unknown"
    except KeyError:
        paper = "unknown"
    dataset = str(metrics.get("dataset") or (experiment.get("data") or {}).get("dataset") or "")
    data_name, licence, licence_id = _data_licence(dataset, experiment)
    task = (header.get("task") or {}).get("kind", "unknown")
    kind = TASKS.get(task)
    return {
        "name": str(experiment.get("model") or model_type),
        "model_type": model_type,
        "paper": paper,
        "task": task,
        "hub_task": for_task(HUB_TASK, kind) if kind else None,
        "use": for_task(USE, kind) if kind else "score pairs of texts",
        "dataset": dataset,
        "data_name": data_name,
        "licence": licence,
        "licence_id": licence_id,
    }


def _data_licence(dataset: str, experiment: dict[str, Any]) -> tuple[str, str, str]:
    """(the data's name, its licence in words, the Hub's `license` value)."""
    if not dataset:
        return "unknown (no training data recorded)", "unknown", "unknown"
    if dataset == "pairs" or dataset.startswith("pairs:"):
        folder = (experiment.get("data") or {}).get("data_dir") or dataset.partition(":")[2]
        name = f"your own pairs ({Path(str(folder)).name})" if folder else "your own pairs"
        return name, "the licence of your data (not recorded)", "unknown"
    from attnmatch.data.datasets import get_dataset

    try:
        spec = get_dataset(dataset)
    except ValueError:
        return dataset, "unknown", "unknown"
    return spec.name, spec.license, "other"


def _metadata(facts: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "library_name": "attnmatch",
        "license": facts["licence_id"],
        "tags": ["attnmatch", "text-matching", facts["task"], facts["model_type"]],
    }
    if facts["licence_id"] == "other":
        meta["license_name"] = facts["dataset"] + "-data-license"
    if facts["dataset"] and not facts["dataset"].startswith("pairs"):
        meta["datasets"] = [facts["dataset"]]
    if facts["hub_task"]:
        meta["pipeline_tag"] = facts["hub_task"]
    results = [
        _result(facts, split, values)
        for split in ("dev", "test")
        if isinstance(values := metrics.get(split), dict) and _numbers(values)
    ]
    if results:
        meta["metrics"] = sorted({m["type"] for r in results for m in r["metrics"]})
        meta["model-index"] = [{"name": facts["name"], "results": results}]
    return meta


def _result(facts: dict[str, Any], split: str, values: dict[str, Any]) -> dict[str, Any]:
    name = facts["dataset"] or "unknown"
    return {
        "task": {"type": facts["hub_task"] or facts["task"], "name": facts["task"]},
        "dataset": {"name": facts["data_name"], "type": name, "split": split},
        "metrics": [
            {"type": metric, "value": value, "name": f"{split} {metric}"}
            for metric, value in _numbers(values).items()
        ],
    }


def _numbers(values: dict[str, Any], *, keep_null: bool = False) -> dict[str, float | None]:
    """The metrics of a split (counts such as num_queries left out; a metric that was not a
    number, written as null, kept as None with `keep_null`)."""
    return {
        k: v
        for k, v in values.items()
        if not k.startswith("num_")
        and ((isinstance(v, int | float) and not isinstance(v, bool)) or (keep_null and v is None))
    }


def _yaml(meta: dict[str, Any]) -> str:
    return "---\n" + "".join(_yaml_lines(meta, 0)) + "---"


def _yaml_lines(value: Any, indent: int) -> Iterable[str]:
    pad = " " * indent
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list):
                yield f"{pad}{key}:\n"
                yield from _yaml_lines(item, indent + 2)
            else:
                yield f"{pad}{key}: {json.dumps(item, ensure_ascii=False)}\n"
        return
    for item in value:
        if isinstance(item, dict | list):
            lines = list(_yaml_lines(item, indent + 2))
            yield f"{pad}- {lines[0].lstrip()}"
            yield from lines[1:]
        else:
            yield f"{pad}- {json.dumps(item, ensure_ascii=False)}\n"


def _summary(facts: dict[str, Any]) -> str:
    return (
        f"A {facts['task']} model of type `{facts['model_type']}` ({facts['paper']}), trained "
        f"with attnmatch on {facts['data_name']}. "
        "This card is generated from the model's config.json and metrics.json."
    )


def _model_section(header: dict[str, Any], facts: dict[str, Any]) -> str:
    inputs = header.get("inputs") or {}
    shown = {k: v for k, v in inputs.items() if isinstance(v, str | int | float | bool)}
    task = header.get("task") or {}
    lines = [
        "## Model",
        "",
        f"- model: `{facts['name']}` (type `{facts['model_type']}`)",
        f"- paper: {facts['paper']}",
        f"- inputs: {_pairs(shown) or 'none (a model of its own texts)'}",
        f"- task: {_pairs(task)}",
        f"- attnmatch: {header.get('attnmatch_version', __version__)}, "
        f"format {header.get('format', 'unknown')}",
    ]
    return "\n".join(lines)


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in values.items())


def _data_section(facts: dict[str, Any], metrics: dict[str, Any]) -> str:
    lines = ["## Training data", "", f"- dataset: {facts['data_name']}"]
    protocols = metrics.get("protocols") or {}
    for split, info in (metrics.get("data") or {}).items():
        protocol = f", protocol {protocols[split]}" if protocols.get(split) else ""
        lines.append(
            f"- {split}: {info.get('pairs')} pairs in {info.get('groups')} groups{protocol}, "
            f"sha256 `{info.get('sha256')}`"
        )
    if not metrics.get("data"):
        lines.append("- splits: not recorded")
    lines.append(f"- licence of the data: {facts['licence']}")
    return "\n".join(lines)


def _recipe_section(metrics: dict[str, Any]) -> str:
    experiment = metrics.get("experiment") or {}
    train = experiment.get("train") or {}
    if not train:
        return "## Training recipe\n\nNot recorded (the model was saved outside a training run)."
    recipe = {k: train[k] for k in _RECIPE_KEYS if k in train}
    env = metrics.get("environment") or {}
    lines = [
        "## Training recipe",
        "",
        f"- {_pairs(recipe)}",
        f"- best epoch (selected on dev): {metrics.get('best_epoch', 'unknown')}",
        f"- model overrides: {_pairs(experiment.get('model_overrides') or {}) or 'none'}",
        f"- training time: {metrics.get('train_time_s', 'unknown')} s on "
        f"{metrics.get('device', 'unknown')}",
        f"- code: attnmatch {env.get('attnmatch', 'unknown')}, commit "
        f"{env.get('commit', 'unknown')}, torch {env.get('torch', 'unknown')}",
    ]
    return "\n".join(lines)


def _results_section(metrics: dict[str, Any]) -> str:
    dev, test = (_numbers(metrics.get(s) or {}, keep_null=True) for s in ("dev", "test"))
    if not dev and not test:
        return "## Results\n\nNo evaluation recorded."
    floors = metrics.get("floors") or {}
    baselines = list(dict.fromkeys(b for split in floors.values() for b in split))
    head = ["metric", "dev", "test", *(f"{b} (dev / test)" for b in baselines)]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for metric in dict.fromkeys([*dev, *test]):
        cells = [metric, _value(dev.get(metric)), _value(test.get(metric))]
        for b in baselines:
            pair = [(floors.get(s) or {}).get(b, {}).get(metric) for s in ("dev", "test")]
            cells.append(" / ".join(_value(v) for v in pair))
        rows.append("| " + " | ".join(cells) + " |")
    note = (
        "Dev selected the epoch; test was evaluated once. The floors are baselines without "
        "training (`attnmatch.floors`): a model should beat them."
    )
    return "## Results\n\n" + "\n".join(rows) + "\n\n" + note


def _value(value: Any) -> str:
    return "-" if value is None else f"{value:.4f}"


def _speed_section(metrics: dict[str, Any]) -> str:
    speed = metrics.get("speed")
    if not isinstance(speed, dict) or not isinstance(speed.get("pairs_per_s"), int | float):
        return "## Speed\n\nNot measured for this model."
    threads = speed.get("threads")
    one = (
        "one CPU thread" if threads == 1 and speed.get("device") == "cpu" else "not one CPU thread"
    )
    return (
        f"## Speed\n\n{speed['pairs_per_s']} pairs/s on {speed.get('device', 'unknown')} with "
        f"{threads} thread(s) ({one}), {speed.get('measured', 'measured once')}, over "
        f"{speed.get('pairs')} pairs: a single measurement, noisy on a shared machine; "
        "`attnmatch score` on your own pairs measures it where the model will run."
    )


def _use_section(facts: dict[str, Any]) -> str:
    return "\n".join(
        [
            "## Intended use and limits",
            "",
            f"- Use: {facts['use']}, for texts like those of its training data.",
            "- Limits: it knows only what its training pairs show; scores of texts far from "
            "them (another language, domain or length) are not calibrated, and the results "
            "above hold for its dev and test splits only.",
            "",
            "```python",
            "from attnmatch import Matcher",
            'matcher = Matcher.load("path/to/this/folder")',
            "```",
            "",
            "## Licence",
            "",
            f"The data's terms apply to this model: {facts['licence']}.",
        ]
    )
