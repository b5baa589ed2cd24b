"""Tasks: what a model's outputs mean, how they are decoded, evaluated and served.

Three kinds, one frozen class and one module each:

- `RankingTask` (ranking.py): one relevance score per pair (or a match / no-match head, scored
  by log P(match)); losses rank_hinge (default), listwise, cross_entropy (pointwise).
- `ClassificationTask` (classification.py): one logit per class (`class_names`); loss
  cross_entropy.
- `RegressionTask` (regression.py): a similarity score in [min_score, max_score] (STS 0-5,
  SICK 1-5), predicted as a distribution over the integer levels (loss kl) or as one value
  (loss mse).

A task is also an evaluation protocol: its name (e.g. "wikiqa-official"), metrics, primary metric
and which groups count. A dataset spec declares one per split; `Task.of(protocol)` is the task
without them, what a model trained on the split predicts and saves (config.json "task": its
kind, class names, score range and, for ranking, its calibration). `Task(kind=...)` builds the
kind's class, as that dict does.

What defines a kind is a member of its class (base.py: `Task`): losses and head sizes, decoding
outputs into `Predictions` (scores, labels, probabilities, the relevance a service returns),
calibration on dev, metrics and per-item results, label checks and zero-shot heads. What
another module does per kind (recipes, distillation, floors, model cards) is a table keyed by
task class in that module, read through `for_task`; no code elsewhere compares kinds (a test
counts).

Relevance (`Predictions.relevance`, what `/rerank` returns): classification, P(last class) from
the softmax; regression, the prediction mapped linearly onto [0, 1] from the score range (a
similarity, not a probability); ranking, a probability only when the model carries a Platt
calibration fitted on dev (`attnmatch.calibration`), otherwise none: the raw score stands.
"""

from attnmatch.tasks.base import (
    SAVED_KEYS,
    TASKS,
    Predictions,
    Task,
    among,
    for_task,
    non_standard,
    same_kind,
)
from attnmatch.tasks.classification import (
    CLASSIFICATION_METRICS,
    MULTICLASS_METRICS,
    ClassificationTask,
)
from attnmatch.tasks.ranking import (
    GROUP_LOSSES,
    RANKING_METRICS,
    RankingTask,
    output_scores,
    ranking_scores,
)
from attnmatch.tasks.records import item_values, migrate_v1_task
from attnmatch.tasks.regression import (
    REGRESSION_METRICS,
    RegressionTask,
    integral,
    predicted_scores,
    regression_predictions,
)

TASKS.update((task.kind, task) for task in (RankingTask, ClassificationTask, RegressionTask))

__all__ = [
    "CLASSIFICATION_METRICS",
    "GROUP_LOSSES",
    "MULTICLASS_METRICS",
    "RANKING_METRICS",
    "REGRESSION_METRICS",
    "SAVED_KEYS",
    "TASKS",
    "ClassificationTask",
    "Predictions",
    "RankingTask",
    "RegressionTask",
    "Task",
    "among",
    "for_task",
    "integral",
    "item_values",
    "migrate_v1_task",
    "non_standard",
    "output_scores",
    "predicted_scores",
    "ranking_scores",
    "regression_predictions",
    "same_kind",
]
