"""config.json of a model directory or an exported one, read without torch: its format, the
fields an exported directory must have, and the task it saves (the model directory's reader,
`attnmatch.model_dir`, and `attnmatch.runtime` both read them here)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from attnmatch.strict_json import read_json
from attnmatch.tasks import Task

FORMAT = "attnmatch.model/2"
FORMAT_V1 = "attnmatch.model/1"


def read_exported_header(path: Path) -> dict[str, Any]:
    """An exported directory's config.json: of `FORMAT`, with a model type and the objects
    `config`, `task` and `inputs` (ValueError naming the file and the field otherwise)."""
    config_file = path / "config.json"
    header = read_json(config_file)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{config_file}: not an {FORMAT} config (field 'format')")
    for key in ("model_type", "config", "task", "inputs"):
        if not isinstance(header.get(key), str if key == "model_type" else dict):
            raise ValueError(f"{config_file}: missing or malformed field {key!r}")
    return header


def read_metrics(path: Path) -> dict[str, Any]:
    """A directory's metrics.json ({} when it has none, or holds no object)."""
    metrics_file = path / "metrics.json"
    metrics = read_json(metrics_file) if metrics_file.is_file() else {}
    return metrics if isinstance(metrics, dict) else {}


def load_task(config_file: Path, data: dict[str, Any]) -> Task:
    """config.json's `task`, its field types checked (`Task` checks the values)."""
    if "kind" not in data:
        raise ValueError(
            f"{config_file}: missing key 'task.kind' (ranking, classification or regression)"
        )
    names = data.get("class_names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{config_file}: field 'task.class_names' must be a list of strings")
    if len(set(names)) != len(names):
        raise ValueError(f"{config_file}: field 'task.class_names' names a class twice")
    for key in ("min_score", "max_score"):
        value = data.get(key, 0)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise ValueError(
                f"{config_file}: field 'task.{key}' must be a finite number, got {value!r}"
            )
    with naming(config_file, "task"):
        return Task.from_dict(data)


def check_task_fits(config_file: Path, task: Task, num_outputs: int | None) -> None:
    """The model's outputs are what its task reads: one logit per class, one value or one per
    integer score level (nothing to check when the config does not say)."""
    if num_outputs is None:
        return
    with naming(config_file):
        task.check_num_outputs(num_outputs)


@contextmanager
def naming(file: Path, field: str = "") -> Iterator[None]:
    """Turns a ValueError, KeyError or TypeError of the body into one ValueError naming
    `file` (and `field`), unless its message names the model directory already."""
    try:
        yield
    except (ValueError, KeyError, TypeError) as e:
        message = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
        if str(file.parent) in message:
            raise
        prefix = f"{file}: {field}: " if field else f"{file}: "
        raise ValueError(prefix + " ".join(message.split())) from e
