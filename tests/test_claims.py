"""`attnmatch reproduce claims`: the paired tests, the verdict rules and a tiny end-to-end run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from attnmatch import configs
from attnmatch.research.claims import (
    Paired,
    load_claims,
    paired_means,
    paired_pearson,
    reproduce_claims,
    t_interval,
    verdict,
)

FIXTURE = Path(__file__).parent / "fixtures" / "pairs_tiny"


def test_t_interval_of_a_known_sample() -> None:
    low, high = t_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, t(0.975, 2) = 4.303
    half = 4.303 / math.sqrt(3)
    assert (low, high) == pytest.approx((2 - half, 2 + half))


def test_paired_means_sees_a_shift_and_not_noise() -> None:
    rng = np.random.default_rng(1)
    b = rng.uniform(0, 1, 300)
    shifted = paired_means(b + 0.05 + rng.normal(0, 0.02, 300), b, resamples=2000)
    assert shifted.diff == pytest.approx(0.05, abs=0.01)
    assert shifted.p < 0.001 and shifted.low > 0.03 and shifted.high < 0.07
    same = paired_means(b, b.copy(), resamples=2000)
    assert same.diff == 0 and same.p == 1.0
    noise = paired_means(b + rng.normal(0, 0.05, 300), b, resamples=2000)
    assert noise.p > 0.01 and noise.low < 0 < noise.high
    # The sign is A - B.
    assert paired_means(b, b + 0.1, resamples=500).diff == pytest.approx(-0.1)


def test_paired_pearson_prefers_the_closer_predictions() -> None:
    rng = np.random.default_rng(2)
    gold = rng.uniform(0, 5, 200)
    good = gold + rng.normal(0, 0.5, (3, 200))  # 3 seeds
    bad = gold + rng.normal(0, 2.0, (3, 200))
    result = paired_pearson(good, bad, gold, None, resamples=300)
    expected = np.mean([np.corrcoef(g, gold)[0, 1] for g in good]) - np.mean(
        [np.corrcoef(b, gold)[0, 1] for b in bad]
    )
    assert result.diff == pytest.approx(expected)
    assert result.diff > 0.2 and result.p < 0.01 and result.low > 0
    tie = paired_pearson(good, good.copy(), gold, None, resamples=200)
    assert tie.diff == 0 and tie.p == 1.0


def test_paired_pearson_weights_sets_by_pairs() -> None:
    rng = np.random.default_rng(3)
    gold = rng.uniform(0, 5, 90)
    groups = ["x"] * 30 + ["y"] * 60
    a = gold[None, :] + rng.normal(0, 1.0, (2, 90))
    b = gold[None, :] + rng.normal(0, 1.0, (2, 90))

    def weighted(pred: np.ndarray) -> float:
        out = 0.0
        for members, weight in ((slice(0, 30), 30 / 90), (slice(30, 90), 60 / 90)):
            out += weight * np.mean([np.corrcoef(p[members], gold[members])[0, 1] for p in pred])
        return out

    result = paired_pearson(a, b, gold, groups, resamples=100)
    assert result.diff == pytest.approx(weighted(a) - weighted(b))


@pytest.mark.parametrize(
    ("relation", "diff", "low", "high", "p", "expected"),
    [
        (">", 0.03, 0.01, 0.05, 0.001, "holds"),
        (">", 0.03, -0.01, 0.07, 0.20, "undecided"),
        (">", -0.03, -0.05, -0.01, 0.001, "does not hold"),
        (">", 0.001, -0.004, 0.006, 0.70, "does not hold"),  # at best negligibly better
        (">=", 0.001, -0.004, 0.006, 0.70, "holds"),
        (">=", -0.03, -0.05, -0.01, 0.001, "does not hold"),
        (">=", -0.01, -0.04, 0.02, 0.40, "undecided"),
    ],
)
def test_verdict_rules(
    relation: str, diff: float, low: float, high: float, p: float, expected: str
) -> None:
    assert verdict(relation, Paired(diff, low, high, p, 100, "randomisation"), 0.05, 0.01) == (
        expected
    )


TABLE = """
table = "tiny"
title = "tiny"
protocol = "tiny"
metrics = ["map"]
[defaults]
data = {{ dataset = "pairs", data_dir = "{fixture}" }}
inputs = {{ kind = "word_vectors", vectors = "random", dim = 8 }}
train = {{ epochs = 2, batch_size = 4, num_negatives = 2, lr = 0.01, patience = 0 }}
model_overrides = {{ hidden_size = 8, k = 10 }}
[[rows]]
id = "plain"
label = "MV-LSTM"
model = "mvlstm"
[[rows]]
id = "gated"
label = "aMV-LSTM (Q)"
model = "amvlstm_q"
"""

CLAIMS = """
seeds = [1, 2]
resamples = 200
[[settings]]
name = "glove"
label = "the table's inputs"
[[settings]]
name = "other"
label = "other inputs"
not_run = "compute"
[[claims]]
id = "gated-vs-plain"
paper = "aMV-LSTM"
statement = "the gate helps"
a = "tiny:gated"
b = "tiny:plain"
metric = "map"
"""


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, claims: str = CLAIMS) -> Path:
    (tmp_path / "benchmarks" / "tables").mkdir(parents=True)
    (tmp_path / "benchmarks" / "tables" / "tiny.toml").write_text(
        TABLE.format(fixture=FIXTURE), encoding="utf-8"
    )
    (tmp_path / "benchmarks" / "claims.toml").write_text(claims, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_claims_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, monkeypatch)
    result = reproduce_claims(runs_dir=tmp_path / "runs", results_dir=tmp_path / "results")
    glove, other = result["claims"]
    assert other["verdict"] == "not run" and other["why"] == "compute"
    assert glove["verdict"] in ("holds", "does not hold", "undecided")
    assert glove["a"]["seeds"] == [1, 2] and len(glove["a"]["runs"]) == 2
    # The paired difference of MAP is the difference of the seed-mean MAPs (same queries).
    assert glove["diff"] == pytest.approx(glove["a"]["mean"] - glove["b"]["mean"])
    assert glove["diff_ci95"][0] <= glove["diff"] <= glove["diff_ci95"][1]
    run = tmp_path / "runs" / "claims" / "glove" / "tiny" / "gated" / "seed-1"
    items = json.loads((run / "test_items.json").read_text())
    assert items["kind"] == "ranking" and len(items["queries"]) == 8
    saved = json.loads((tmp_path / "results" / "claims.json").read_text())
    assert saved["claims"][0]["p"] == glove["p"]
    page = (tmp_path / "results" / "claims.md").read_text()
    assert "the gate helps" in page and f"**{glove['verdict']}**" in page
    assert "Not run (1 claim, the same as above): compute" in page
    # Finished runs are reused: deciding again trains nothing and gives the same answer.
    stamp = (run / "result.json").stat().st_mtime_ns
    again = reproduce_claims(runs_dir=tmp_path / "runs", results_dir=None, train=False)
    assert again["claims"][0]["p"] == glove["p"]
    assert (run / "result.json").stat().st_mtime_ns == stamp


def test_claims_without_runs_are_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _project(tmp_path, monkeypatch)
    result = reproduce_claims(runs_dir=tmp_path / "runs", results_dir=None, train=False)
    assert result["claims"][0]["verdict"] == "not run"
    assert result["claims"][0]["why"] == "4 of 4 runs not trained"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("tiny:gated", "tiny:nothing"), "table tiny has no row 'nothing'"),
        (("tiny:gated", "tinygated"), "a system is TABLE:ROW"),
        (('metric = "map"', 'metric = "map"\nrelation = "<"'), "relation"),
        (("seeds = [1, 2]", "seeds = [1]"), "at least 2 seeds"),
    ],
)
def test_bad_claims_files_name_the_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: tuple[str, str], message: str
) -> None:
    project = _project(tmp_path, monkeypatch, CLAIMS.replace(*edit))
    with pytest.raises(configs.ConfigError, match="claims.toml") as e:
        load_claims(project / "benchmarks" / "claims.toml")
    assert message in str(e.value)


def test_the_project_claims_load() -> None:
    spec = load_claims(Path(__file__).parents[1] / "benchmarks" / "claims.toml")
    assert len(spec.seeds) >= 5 and {s.name for s in spec.settings} == {"glove", "minilm"}
    assert len(spec.claims) >= 20


def test_reproduce_update_replaces_only_the_rows_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnmatch.research.reproduce import reproduce

    _project(tmp_path, monkeypatch)
    runs, results = tmp_path / "runs", tmp_path / "results"
    whole = reproduce("tiny", seeds=[1], runs_dir=runs, results_dir=results, progress=False)
    saved = json.loads((results / "tiny.json").read_text())
    assert [r["id"] for r in saved["rows"]] == ["plain", "gated"]
    # A partial reproduction writes nothing without update ...
    (results / "tiny.json").write_text(json.dumps(saved | {"marker": 1}))
    reproduce("tiny", seeds=[2], rows=["gated"], runs_dir=runs, results_dir=results, progress=False)
    assert json.loads((results / "tiny.json").read_text())["marker"] == 1
    # ... and with it, replaces its rows and keeps the others as they were.
    reproduce(
        "tiny", seeds=[2], rows=["gated"], runs_dir=runs, results_dir=results, progress=False,
        update=True,
    )  # fmt: skip
    updated = json.loads((results / "tiny.json").read_text())
    assert [r["id"] for r in updated["rows"]] == ["plain", "gated"]
    assert updated["rows"][0] == whole["rows"][0]
    assert updated["rows"][1]["seeds"] == [2]
    assert "gated" in (results / "tiny.md").read_text()
