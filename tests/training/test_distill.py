"""Distillation: the losses' values, the teacher's cache, the extra pairs, a student that
learns its teacher, and `attnmatch distill`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from typer.testing import CliRunner

from attnmatch import Matcher
from attnmatch.cli import app
from attnmatch.data.datasets import Split
from attnmatch.data.schema import Example, PairBatch
from attnmatch.losses import (
    distill_loss,
    listwise_kl_loss,
    margin_mse_loss,
    mixed_loss,
    soft_kl_loss,
)
from attnmatch.tasks import ClassificationTask, RankingTask, RegressionTask
from attnmatch.training import ExperimentConfig
from attnmatch.training.api import splits_from_pairs
from attnmatch.training.distillation import (
    CACHE_FILE,
    DistillConfig,
    augmented_pairs,
    cached_targets,
    cross_pairs,
    default_inputs,
    distill_splits,
    extra_candidates,
    nearest_candidates,
    resolve_distill_loss,
    task_targets,
    teacher_targets,
)
from attnmatch.training.experiment import load_splits

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"


def _batch(labels: list[float], teacher: list[list[float]], groups: list[int]) -> PairBatch:
    n = len(labels)
    ids = torch.ones(n, 2, dtype=torch.long)
    mask = torch.ones(n, 2, dtype=torch.bool)
    return PairBatch(
        ids, mask, ids, mask, torch.tensor(labels), torch.tensor(groups), torch.tensor(teacher)
    )


def test_margin_mse_value() -> None:
    scores = torch.tensor([[3.0, 1.0, 0.0]])  # student margins 2, 3
    teacher = torch.tensor([[5.0, 4.0, 1.0]])  # teacher margins 1, 4
    assert margin_mse_loss(scores, teacher).item() == pytest.approx((1 + 1) / 2)
    # Margins only: shifting either side's scores changes nothing.
    assert margin_mse_loss(scores + 7, teacher - 2).item() == pytest.approx(1.0)


def test_kl_losses_vanish_on_the_teacher_and_not_elsewhere() -> None:
    logits = torch.tensor([[2.0, 0.5, -1.0]])
    assert listwise_kl_loss(logits, logits.clone()).item() == pytest.approx(0.0, abs=1e-6)
    probs = torch.softmax(logits, dim=-1)
    assert soft_kl_loss(logits, probs).item() == pytest.approx(0.0, abs=1e-6)
    uniform = torch.full((1, 3), 1 / 3)
    expected = float((uniform * (uniform.log() - torch.log_softmax(logits, -1))).sum())
    assert soft_kl_loss(logits, uniform).item() == pytest.approx(expected, rel=1e-5)


def test_score_mse_reads_the_predicted_score() -> None:
    batch = _batch([3.0, 1.0], [[2.0], [1.0]], [0, 1])
    outputs = torch.tensor([[4.0], [1.0]])  # one-column regression: the value itself
    assert distill_loss("score_mse", outputs, batch).item() == pytest.approx(2.0)


def test_mixed_loss_weights_gold_and_teacher_and_skips_pairs_without_gold() -> None:
    outputs = torch.tensor([[4.0], [1.0], [0.0]])
    batch = _batch([3.0, math.nan, 0.0], [[2.0], [1.0], [0.0]], [0, 1, 2])
    soft = distill_loss("score_mse", outputs, batch).item()  # (4 + 0 + 0) / 3
    gold = ((4 - 3) ** 2 + 0) / 2  # the NaN pair has no gold label
    mixed = mixed_loss("mse", "score_mse", 0.25, outputs, batch).item()
    assert mixed == pytest.approx(0.75 * gold + 0.25 * soft)
    assert mixed_loss("mse", "score_mse", 1.0, outputs, batch).item() == pytest.approx(soft)


def test_each_task_has_its_distillation_losses() -> None:
    assert resolve_distill_loss(RankingTask(), "auto") == "margin_mse"
    assert resolve_distill_loss(RankingTask(), "listwise_kl") == "listwise_kl"
    assert resolve_distill_loss(RegressionTask(min_score=0, max_score=5), "auto") == "score_mse"
    classes = ClassificationTask(class_names=("no", "yes"))
    assert resolve_distill_loss(classes, "auto") == "soft_kl"
    with pytest.raises(ValueError, match="cannot train a classification task"):
        resolve_distill_loss(classes, "margin_mse")
    probs = task_targets(classes, np.array([[0.0, 0.0], [2.0, 0.0]], dtype=np.float32))
    assert probs.shape == (2, 2) and np.allclose(probs.sum(axis=1), 1.0)


def _ranking_examples() -> list[Example]:
    return [
        Example("red apple fruit", "the apple is a red fruit", 1, "q1"),
        Example("red apple fruit", "cars drive on roads", 0, "q1"),
        Example("fast car road", "a fast car on the road", 1, "q2"),
        Example("fast car road", "bananas are yellow", 0, "q2"),
        Example("blue sky", "the sky is blue today", 0, "q3"),  # no positive
        Example("old tree", "an old oak tree in the park", 1, "q4"),
    ]


def test_extra_candidates_are_new_and_labelled_negative() -> None:
    examples = _ranking_examples()
    extra = extra_candidates(examples, bm25=1, random=1, seed=3)
    own = {g: {ex.right for ex in examples if ex.group == g} for g in ("q1", "q2", "q4")}
    assert {ex.group for ex in extra} == {"q1", "q2", "q4"}  # queries with a positive
    for ex in extra:
        assert ex.right not in own[ex.group] and ex.label == 0
    for g in own:
        assert 1 <= sum(ex.group == g for ex in extra) <= 2
    assert extra == extra_candidates(examples, bm25=1, random=1, seed=3)  # deterministic


def test_nearest_candidates_are_the_teachers_nearest_new_texts(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from tests.tiny_transformer import write_tiny_encoder

    examples = _ranking_examples()
    teacher = Matcher.from_encoder(str(write_tiny_encoder(tmp_path / "encoder")))
    extra = nearest_candidates(examples, [Matcher.from_lexical("bm25"), teacher], 2)
    own = {g: {ex.right for ex in examples if ex.group == g} for g in ("q1", "q2", "q4")}
    assert {ex.group for ex in extra} == {"q1", "q2", "q4"}  # queries with a positive
    for g in own:
        assert sum(ex.group == g for ex in extra) == 2
    for ex in extra:
        assert ex.right not in own[str(ex.group)] and ex.label == 0
    corpus = list(dict.fromkeys(ex.right for ex in examples))
    vectors = torch.nn.functional.normalize(teacher.embed(corpus + ["red apple fruit"]), dim=-1)
    similarity = (vectors[:-1] @ vectors[-1]).tolist()
    ranked = [
        t
        for _, t in sorted(zip(similarity, corpus, strict=True), reverse=True)
        if t not in own["q1"]
    ]
    assert [ex.right for ex in extra if ex.group == "q1"] == ranked[:2]
    assert nearest_candidates(examples, [Matcher.from_lexical("bm25")], 2) == []  # no vectors


def test_a_bi_encoder_teacher_gives_its_students_its_static_vectors(tmp_path: Path) -> None:
    pytest.importorskip("model2vec")
    from tests.tiny_transformer import write_tiny_encoder

    source = str(write_tiny_encoder(tmp_path / "encoder"))
    teacher = Matcher.from_encoder(source)
    assert default_inputs(teacher, source, RankingTask()) == f"static:{source}"
    assert default_inputs(Matcher.from_lexical("bm25"), "bm25", RankingTask()) is None
    # measured worse than the students' own inputs on small paraphrase and similarity sets
    assert default_inputs(teacher, source, RegressionTask(min_score=0, max_score=5)) is None
    assert default_inputs(teacher, source, ClassificationTask(class_names=("0", "1"))) is None


def test_augmented_pairs_mask_and_cut_the_training_texts() -> None:
    examples = _ranking_examples()
    extra = augmented_pairs(examples, 3.0, seed=0)
    assert len(extra) == 3 * len(examples)
    assert all(math.isnan(float(ex.label)) and ex.group is None for ex in extra)
    words = {w for ex in examples for w in f"{ex.left} {ex.right}".split()} | {"[MASK]"}
    assert all(set(f"{ex.left} {ex.right}".split()) <= words for ex in extra)
    assert any("[MASK]" in f"{ex.left} {ex.right}" for ex in extra)
    assert [(e.left, e.right) for e in extra] == [
        (e.left, e.right) for e in augmented_pairs(examples, 3.0, seed=0)
    ]  # deterministic
    assert augmented_pairs(examples, 0.0, seed=0) == []


def test_cross_pairs_join_groups_without_gold() -> None:
    examples = _ranking_examples()
    extra = cross_pairs(examples, 2.0, seed=0)
    assert extra and all(math.isnan(float(ex.label)) for ex in extra)
    group_of = {ex.right: ex.group for ex in examples}
    left_group = {ex.left: ex.group for ex in examples}
    assert all(group_of[ex.right] != left_group[ex.left] for ex in extra)


def test_the_cache_follows_the_umask(tmp_path: Path) -> None:
    import os

    before = os.umask(0o022)
    try:
        cached_targets(tmp_path / CACHE_FILE, [Matcher.from_lexical("bm25")], _ranking_examples())
    finally:
        os.umask(before)
    assert (tmp_path / CACHE_FILE).stat().st_mode & 0o777 == 0o644  # as every other file


def test_cache_is_reused_and_a_changed_teacher_or_data_refused(tmp_path: Path) -> None:
    path = tmp_path / CACHE_FILE
    examples = _ranking_examples()
    bm25, overlap = Matcher.from_lexical("bm25"), Matcher.from_lexical("overlap")
    first, seconds = cached_targets(path, [bm25], examples)
    assert first.shape == (len(examples), 1) and path.is_file()
    again, seconds = cached_targets(path, [bm25], examples)
    assert seconds == 0.0 and np.array_equal(first, again)  # read back, not scored
    with pytest.raises(ValueError, match="another teacher") as refused:
        cached_targets(path, [overlap], examples)
    assert "\n" not in str(refused.value)
    with pytest.raises(ValueError, match="other training data"):
        cached_targets(path, [bm25], examples[:-1])
    from safetensors.numpy import save_file

    save_file({"targets": first}, str(path), metadata={"teacher": "x", "data": "y"})
    with pytest.raises(ValueError, match="made another way"):  # an older recipe's file
        cached_targets(path, [bm25], examples)
    # --overwrite scores a stale cache again and replaces it; a matching one is still reused.
    replaced, seconds = cached_targets(path, [overlap], examples, replace=True)
    assert seconds > 0.0 and not np.array_equal(replaced, first)
    kept, seconds = cached_targets(path, [overlap], examples, replace=True)
    assert seconds == 0.0 and np.array_equal(kept, replaced)
    assert cached_targets(path, [overlap], examples)[1] == 0.0


def test_ranking_teachers_are_standardised_before_they_are_averaged() -> None:
    examples = _ranking_examples()
    bm25, overlap = Matcher.from_lexical("bm25"), Matcher.from_lexical("overlap")
    one = teacher_targets([bm25], examples)[:, 0]
    assert abs(one.mean()) < 1e-5 and abs(one.std() - 1) < 1e-4
    raw = bm25.score([(ex.left, ex.right) for ex in examples])
    assert np.corrcoef(one, raw)[0, 1] > 0.9999  # an affine map: the ranking is the same
    both = teacher_targets([bm25, overlap], examples)[:, 0]
    expected = (one + teacher_targets([overlap], examples)[:, 0]) / 2
    np.testing.assert_allclose(both, expected, atol=1e-5)


def _student(**train: object) -> ExperimentConfig:
    return ExperimentConfig.from_dict(
        {
            "model": "mvlstm",
            "model_overrides": {"hidden_size": 8, "k": 10},
            "data": {"dataset": "pairs", "data_dir": str(FIXTURE)},
            "inputs": {"kind": "word_vectors", "vectors": "random", "dim": 8},
            "train": {
                "epochs": 6,
                "batch_size": 4,
                "num_negatives": 2,
                "lr": 0.01,
                "patience": 0,
                "floors": "lexical",
                **train,
            },
        }
    )


def _agreement(matcher: Matcher, teacher: Matcher, examples: list[Example]) -> float:
    pairs = [(ex.left, ex.right) for ex in examples]
    return float(spearmanr(matcher.score(pairs), teacher.score(pairs)).statistic)


def test_a_student_learns_its_teacher(tmp_path: Path) -> None:
    teacher = Matcher.from_lexical("overlap")
    config = _student(epochs=10)
    splits = load_splits(config)
    result = distill_splits(
        config, [teacher], splits, tmp_path / "run", DistillConfig(weights=(1.0,))
    )
    assert (tmp_path / "run" / "model" / "model.safetensors").is_file()
    assert json.loads((tmp_path / "run" / "distill.json").read_text())["weight"] == 1.0
    assert (tmp_path / "run" / "test_items.json").is_file() and result.test is not None
    train, dev, _ = splits
    assert dev is not None
    untrained = Matcher.untrained(
        "mvlstm",
        inputs={"kind": "word_vectors", "vectors": "random", "dim": 8},
        task=RankingTask(),
        overrides={"hidden_size": 8, "k": 10},
        train_texts=[t for ex in train.examples for t in (ex.left, ex.right)],
        seed=1,
    )
    learned = _agreement(Matcher.load(result.model_dir), teacher, dev.examples)
    before = _agreement(untrained, teacher, dev.examples)
    # From the teacher alone (weight 1): agreement .48 -> .64 when this test was written.
    assert learned > before + 0.1, (before, learned)
    assert result.floors["test"]["overlap"]["map"] == pytest.approx(1.0)
    # A second run on the same folder reads the teacher's scores back.
    again = distill_splits(
        _student(epochs=1),
        [teacher],
        splits,
        tmp_path / "run",
        DistillConfig(weights=(1.0,)),
        overwrite=True,
    )
    assert again.teacher_seconds == 0.0


def test_distill_command_prints_teacher_student_and_floors(tmp_path: Path) -> None:
    args = [
        "distill", "--teacher", "bm25", "--student", "mvlstm", "--dataset", "pairs",
        "--data-dir", str(FIXTURE), "--inputs", "random", "--epochs", "2", "--weights", "1",
        "--set", "train.batch_size=4", "--set", "train.floors=lexical",
        "--set", "model_overrides.hidden_size=8", "-o", str(tmp_path / "run"),
    ]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "teacher" in result.output and "student (weight 1)" in result.output
    assert "floor: bm25" in result.output and "pairs/s" in result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["pairs_per_s"]["student"] > 0 and summary["teacher"]["test"]["map"] == 1.0
    assert summary["pairs_per_s"]["overlap"] > 0 and summary["pairs_per_s"]["bm25"] > 0
    floor_line = next(line for line in result.output.splitlines() if "floor: bm25" in line)
    assert "pairs/s" in floor_line and "mrr" in floor_line  # every metric of the task
    student_line = next(line for line in result.output.splitlines() if "student (weight 1)" in line)
    assert "(mrr" in student_line and "ndcg@3" in result.output
    assert 'floor left out: minilm-l6 zero-shot: train.floors = "lexical"' in result.output


def test_every_weights_student_under_a_floor_on_dev_is_warned_about() -> None:
    from attnmatch.training.distillation import DistillResult, under_floors

    result = DistillResult(
        output_dir=Path("run"),
        model_dir=Path("run/model"),
        weight=0.5,
        dev={"map": 0.7},
        test=None,
        by_weight={"0.5": {"map": 0.7}, "1": {"map": 0.5}},
        floors={"dev": {"random": {"map": 0.65}, "bm25": {"map": 0.6}, "overlap": {"map": 0.4}}},
    )
    lines = under_floors(result, "map")
    assert lines == [
        "warning: the weight-1 student is under floors on dev (map 0.500 against bm25 0.600)"
    ]
    result.by_weight["0.5"] = {"map": 0.55}
    assert "weight-0.5 student (kept)" in under_floors(result, "map")[0]


def test_speeds_are_measured_on_pairs_of_new_text() -> None:
    from attnmatch.training.distill_runs import new_text_pairs

    examples = [
        Example(left="q1", right="a1", label=1),
        Example(left="q1", right="a2", label=0),  # q1 again
        Example(left="q2", right="a1", label=0),  # a1 again
        Example(left="q3", right="q3", label=1),  # one text twice
        Example(left="q4", right="a4", label=1),
        Example(left="q5", right="a5", label=1),
    ]
    assert new_text_pairs(examples, 10) == [("q1", "a1"), ("q4", "a4"), ("q5", "a5")]
    assert new_text_pairs(examples, 2) == [("q1", "a1"), ("q4", "a4")]


def test_the_teacher_is_timed_without_its_cache_of_encoded_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frozen teacher caches the texts it encoded while labelling and being evaluated; the
    speed test must pay for encoding, as a new text would."""
    pytest.importorskip("transformers")
    from attnmatch.models import input_layer
    from attnmatch.training import distill_runs
    from tests.tiny_transformer import write_tiny_encoder

    teacher = Matcher.from_encoder(str(write_tiny_encoder(tmp_path / "encoder")))
    assert teacher.inputs is not None
    encoder = input_layer(teacher.model)
    teacher.inputs.enable_cache(encoder)
    teacher.outputs([("red apple fruit", "the apple is a red fruit")])
    assert encoder._cache  # filled
    overlap = Matcher.from_lexical("overlap")
    monkeypatch.setattr(distill_runs.Matcher, "load", staticmethod(lambda path: overlap))
    caches: list[object] = []
    monkeypatch.setattr(
        distill_runs,
        "pairs_per_second",
        lambda matchers, pairs: caches.append(input_layer(matchers["teacher"].model)._cache) or {},
    )
    split = Split("toy", "test", RankingTask(), _ranking_examples(), None, {})
    distill_runs.speeds(teacher, tmp_path / "student", split)
    assert caches == [None]


def test_distill_command_passes_cross_pairs_and_refuses_a_negative_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnmatch.training import distill_runs

    seen: list[DistillConfig] = []

    def capture(*args: object, **kwargs: object) -> None:
        seen.append(args[4])  # type: ignore[arg-type]
        raise SystemExit(0)

    monkeypatch.setattr(distill_runs, "distill_splits", capture)
    base = [
        "distill", "--teacher", "bm25", "--student", "mvlstm", "--dataset", "pairs",
        "--data-dir", str(FIXTURE), "--inputs", "random", "-o", str(tmp_path / "run"),
    ]  # fmt: skip
    CliRunner().invoke(app, [*base, "--cross-pairs", "3"])
    assert seen and seen[0].cross_pairs == 3.0
    refused = CliRunner().invoke(app, [*base, "--cross-pairs", "-1"])
    assert refused.exit_code != 0 and "--cross-pairs" in refused.output
    CliRunner().invoke(app, [*base, "--candidates", "20,10,30", "--augment", "2"])
    options = seen[-1]
    assert (options.bm25_candidates, options.random_candidates) == (20, 10)
    assert options.teacher_candidates == 30 and options.augmented == 2.0
    refused = CliRunner().invoke(app, [*base, "--candidates", "20,10"])
    assert refused.exit_code != 0 and "--candidates" in refused.output


def test_seeds_added_later_join_the_folders_summary(tmp_path: Path) -> None:
    run = tmp_path / "run"
    base = [
        "distill", "--teacher", "bm25", "--student", "mvlstm", "--dataset", "pairs",
        "--data-dir", str(FIXTURE), "--inputs", "random", "--epochs", "1", "--weights", "1",
        "--set", "train.batch_size=4", "--set", "model_overrides.hidden_size=8", "-o", str(run),
    ]  # fmt: skip
    first = CliRunner().invoke(app, [*base, "--seeds", "1"])  # seed 1
    assert first.exit_code == 0, first.output
    speeds = json.loads((run / "summary.json").read_text())["pairs_per_s"]
    later = CliRunner().invoke(app, [*base, "--seeds", "3,2", "--no-speed"])
    assert later.exit_code == 0, later.output
    summary = json.loads((run / "summary.json").read_text())
    folders = [Path(s["output_dir"]).name for s in summary["students"]]
    assert folders == ["seed-1", "seed-2", "seed-3"]
    assert summary["pairs_per_s"] == speeds and speeds["student"] > 0
    # Trained again, a seed's entry is the new one, never twice.
    again = CliRunner().invoke(app, [*base, "--seeds", "2,3", "--no-speed", "--overwrite"])
    assert again.exit_code == 0, again.output
    summary = json.loads((run / "summary.json").read_text())
    assert [Path(s["output_dir"]).name for s in summary["students"]] == folders


def test_an_interrupted_distillation_resumes_and_a_finished_one_is_reused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    base = [
        "distill", "--teacher", "bm25", "--student", "mvlstm", "--dataset", "pairs",
        "--data-dir", str(FIXTURE), "--inputs", "random", "--weights", "1", "--no-speed",
        "--set", "train.batch_size=4", "--set", "model_overrides.hidden_size=8", "-o", str(run),
    ]  # fmt: skip
    first = CliRunner().invoke(app, [*base, "--epochs", "1"])
    assert first.exit_code == 0, first.output
    refused = CliRunner().invoke(app, [*base, "--epochs", "2"])  # the folder holds a run
    assert refused.exit_code != 0
    # A longer budget continues the run from its checkpoint, not from scratch ...
    longer = CliRunner().invoke(app, [*base, "--epochs", "2", "--resume"])
    assert longer.exit_code == 0, longer.output
    assert "after epoch 1" in " ".join(longer.output.split())
    log = (run / "weight-1" / "log.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in log] == [1, 2]
    # ... and once finished, the same command reuses it.
    again = CliRunner().invoke(app, [*base, "--epochs", "2", "--resume"])
    assert again.exit_code == 0, again.output
    assert "finished earlier" in " ".join(again.output.split())
    assert (run / "weight-1" / "log.jsonl").read_text().splitlines() == log
    both = CliRunner().invoke(app, [*base, "--resume", "--overwrite"])
    assert both.exit_code != 0 and "--resume" in both.output


@pytest.mark.parametrize(
    ("task", "labels", "expected"),
    [
        ("regression", [0.5, 3.0, 4.5, 1.0], "mpcnn_attention"),
        ("classification", [0, 1, 1, 0], "amvlstm_q"),
        ("ranking", [1, 0, 1, 0], "amvlstm_q"),
    ],
)
def test_the_default_student_is_the_tasks(task: str, labels: list[float], expected: str) -> None:
    from attnmatch.training.distillation import default_student

    pairs = [("a b", "a c", labels[0]), ("d e", "f g", labels[1])]
    pairs += [("h i", "h j", labels[2]), ("k l", "m n", labels[3])]
    assert default_student(splits_from_pairs(pairs, None, task=task)) == expected


def test_the_distill_command_trains_the_tasks_student_when_none_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnmatch.training import distill_runs
    from attnmatch.training import distillation as module

    models: list[str] = []

    def capture(*args: object, **kwargs: object) -> None:
        models.append(args[0].model)  # type: ignore[attr-defined]
        raise SystemExit(0)

    monkeypatch.setattr(distill_runs, "distill_splits", capture)
    monkeypatch.setattr(module, "default_student", lambda splits: "mpcnn_attention")
    monkeypatch.setattr(module, "default_student_why", lambda splits: "a reason")
    base = [
        "distill", "--teacher", "bm25", "--dataset", "pairs", "--data-dir", str(FIXTURE),
        "--inputs", "random", "-o", str(tmp_path / "run"),
    ]  # fmt: skip
    result = CliRunner().invoke(app, base)
    assert models == ["mpcnn_attention"] and "the task's default: a reason" in result.output
    CliRunner().invoke(app, [*base, "--student", "mvlstm"])
    CliRunner().invoke(app, [*base, "--set", "model=hcrn"])
    assert models == ["mpcnn_attention", "mvlstm", "hcrn"]
