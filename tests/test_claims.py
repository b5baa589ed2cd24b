"""`attnmatch reproduce claims`: the paired tests, the verdict rules and a tiny end-to-end run."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnmatch import configs
from attnmatch.research import claims_stats
from attnmatch.research.claims import (
    Paired,
    load_claims,
    paired_means,
    paired_pearson,
    read_system,
    reproduce_claims,
    t_interval,
    verdict,
)

FIXTURE = Path(__file__).parent / "fixtures" / "pairs_tiny"


def test_t_interval_of_a_known_sample() -> None:
    low, high = t_interval([1.0, 2.0, 3.0])  # mean 2, sd 1, t(0.975, 2) = 4.3027
    half = 4.302652729911275 / math.sqrt(3)
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
    # The system files keep every seed's per-item results, so the claims are decided from them
    # alone once the runs are gone.
    kept = read_system(tmp_path / "results" / "claims" / "glove" / "tiny" / "gated.json.gz")
    assert [r["seed"] for r in kept["runs"]] == [1, 2] and kept["runs"][0]["items"] == items
    assert glove["test"] == "two-level (seeds, items)" and glove["earlier"]["on"] == "these runs"
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
    assert result["claims"][0]["why"] == "no results for tiny:gated, tiny:plain"


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


def test_an_updated_table_says_the_claims_page_beside_it_is_decided_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from attnmatch.cli import app

    _project(tmp_path, monkeypatch)
    update = ["reproduce", "tiny", "--rows", "gated", "--update", "--seeds", "1", "--no-progress"]
    runner = CliRunner()
    assert runner.invoke(app, ["reproduce", "tiny", "--seeds", "1", "--no-progress"]).exit_code == 0
    quiet = runner.invoke(app, update)
    assert quiet.exit_code == 0, quiet.output
    assert "reproduce claims --no-train" not in quiet.output  # no claims page yet
    (tmp_path / "results" / "claims.json").write_text("{}")
    told = runner.invoke(app, update)
    assert told.exit_code == 0, told.output
    assert "claims.json is decided from the tables" in " ".join(told.output.split())
    assert "attnmatch reproduce claims --no-train" in " ".join(told.output.split())


def _update_gated_while(
    monkeypatch: pytest.MonkeyPatch, runs: Path, results: Path, other: Callable[[], None]
) -> list[dict[str, Any]]:
    """`--update` of row "gated" (seed 2) with `other`, another process's work, done while it
    trains; the rows of the table written."""
    from attnmatch.research import reproduce as module

    real_train_row = module._train_row

    def meanwhile(*args: object, **kwargs: object) -> dict[str, object]:
        row = real_train_row(*args, **kwargs)  # type: ignore[arg-type]
        monkeypatch.setattr(module, "_train_row", real_train_row)
        other()
        return row

    monkeypatch.setattr(module, "_train_row", meanwhile)
    module.reproduce(
        "tiny", seeds=[2], rows=["gated"], runs_dir=runs, results_dir=results, progress=False,
        update=True,
    )  # fmt: skip
    return list(json.loads((results / "tiny.json").read_text())["rows"])


def test_two_updates_of_one_table_at_once_keep_both_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another `--update` that finishes while this one trains: its row is kept, not lost."""
    from attnmatch.research.reproduce import reproduce

    _project(tmp_path, monkeypatch)
    runs, results = tmp_path / "runs", tmp_path / "results"
    reproduce("tiny", seeds=[1], runs_dir=runs, results_dir=results, progress=False)

    def other() -> None:  # the other process: row "plain" at seed 3, written first
        reproduce(
            "tiny", seeds=[3], rows=["plain"], runs_dir=runs, results_dir=results,
            progress=False, update=True,
        )  # fmt: skip

    rows = {r["id"]: r for r in _update_gated_while(monkeypatch, runs, results, other)}
    assert rows["plain"]["seeds"] == [3] and rows["gated"]["seeds"] == [2]


def test_an_update_keeps_a_row_added_to_the_table_file_while_it_trained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row "added" enters tiny.toml and is written by another `--update` while "gated" trains
    under the older file: the row is kept, in the file's order."""
    from attnmatch.research.reproduce import reproduce

    project = _project(tmp_path, monkeypatch)
    runs, results = tmp_path / "runs", tmp_path / "results"
    reproduce("tiny", seeds=[1], runs_dir=runs, results_dir=results, progress=False)
    toml = project / "benchmarks" / "tables" / "tiny.toml"
    plain = toml.read_text().split("[[rows]]")[1]

    def other() -> None:
        toml.write_text(toml.read_text() + "\n[[rows]]" + plain.replace('"plain"', '"added"'))
        reproduce(
            "tiny", seeds=[3], rows=["added"], runs_dir=runs, results_dir=results,
            progress=False, update=True,
        )  # fmt: skip

    rows = _update_gated_while(monkeypatch, runs, results, other)
    assert [r["id"] for r in rows] == ["plain", "gated", "added"]
    assert rows[1]["seeds"] == [2] and rows[2]["seeds"] == [3]
    assert "added" in (results / "tiny.md").read_text()


def test_decided_again_from_the_system_files_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(tmp_path, monkeypatch)
    runs, results = tmp_path / "runs", tmp_path / "results"
    first = reproduce_claims(runs_dir=runs, results_dir=results)
    page = (results / "claims.md").read_bytes()
    shutil.rmtree(runs)
    again = reproduce_claims(runs_dir=runs, results_dir=results, train=False)
    assert again["claims"][0]["p"] == first["claims"][0]["p"]
    assert (results / "claims.md").read_bytes() == page


def test_without_results_nothing_is_overwritten_and_the_exit_is_not_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.hostile._util import run_cli

    _project(tmp_path, monkeypatch)
    results = tmp_path / "results"
    results.mkdir()
    for name in ("claims.json", "claims.md"):
        (results / name).write_text("committed\n")
    outcome = run_cli(
        ["reproduce", "claims", "--no-train", "--runs-dir", str(tmp_path / "runs"),
         "--results-dir", str(results)],
        capsys,
    )  # fmt: skip
    code, err = outcome.code, " ".join(outcome.stderr.split())
    assert code != 0
    assert "2 system(s) have no results" in err and "gated.json.gz" in err
    assert "nothing written" in err
    for name in ("claims.json", "claims.md"):
        assert (results / name).read_text() == "committed\n"


REPOSITORY = Path(__file__).parents[1]


def test_the_committed_page_is_decided_again_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clone (results/ and benchmarks/, no runs) decides every claim again, to the byte."""
    shutil.copytree(REPOSITORY / "results", tmp_path / "results")
    shutil.copytree(REPOSITORY / "benchmarks", tmp_path / "benchmarks")
    monkeypatch.chdir(tmp_path)
    reproduce_claims(runs_dir=tmp_path / "runs", results_dir=tmp_path / "results", train=False)
    for name in ("claims.md", "claims.json", "README.md"):
        again = (tmp_path / "results" / name).read_bytes()
        assert again == (REPOSITORY / "results" / name).read_bytes(), name


def test_two_level_counts_the_seeds() -> None:
    rng = np.random.default_rng(4)
    items = rng.uniform(0, 1, 400)  # (N,)
    # Each system's seeds move every item by a common shift: the items alone say nothing of it.
    a = items[None, :] + rng.normal(0, 0.03, (5, 1)) + rng.normal(0, 0.01, (5, 400))
    b = items[None, :] + rng.normal(0, 0.03, (5, 1)) + rng.normal(0, 0.01, (5, 400))
    two = claims_stats.two_level_means(a, b)
    assert two.diff == pytest.approx(a.mean() - b.mean())
    seed_var, df = claims_stats.seed_part(a.mean(axis=1), b.mean(axis=1))
    assert two.seed_var == pytest.approx(seed_var) and two.df == pytest.approx(df) and df <= 8
    assert two.se**2 == pytest.approx(two.seed_var + two.item_var)
    assert two.seed_var > 10 * two.item_var
    old = paired_means(a.mean(axis=0), b.mean(axis=0), resamples=500)
    assert (two.high - two.low) > 4 * (old.high - old.low)
    # From per-seed scores and a recorded item interval: the same test.
    recorded = claims_stats.seed_level(
        list(a.mean(axis=1)), list(b.mean(axis=1)),
        claims_stats.recorded_item_part(two.diff - 1.96 * math.sqrt(two.item_var),
                                        two.diff + 1.96 * math.sqrt(two.item_var)), 400,
    )  # fmt: skip
    assert recorded.p == pytest.approx(two.p, rel=1e-3)


def test_holm_adjusts_step_down() -> None:
    assert claims_stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert claims_stats.holm([0.5]) == [0.5]
    assert claims_stats.holm([0.001, 0.9]) == pytest.approx([0.002, 0.9])


def test_false_positives_of_identical_systems_stay_under_the_nominal_rate() -> None:
    # The spreads of DAMM vs ESIM on SICK (seed sd .0215, item se .0048, 4,927 pairs), where
    # the earlier item-only test said "holds" for about one draw in six.
    spread = claims_stats.Spread("damm-vs-esim-sick", 0.0215, 0.0048, 4927, 5)
    rates = claims_stats.simulate(spread, reps=400, seed=1)
    assert rates["new_holds"] <= 0.05 and rates["new_p05"] <= 0.075
    assert rates["old_holds"] > 0.08


def test_the_committed_false_positive_rates_are_within_the_nominal_rate() -> None:
    fp = json.loads((REPOSITORY / "results" / "claims" / "false_positives.json").read_text())
    assert fp["spreads"] >= 20 and fp["reps"] >= 1000
    assert fp["new"]["holds_max"] <= 0.05 and fp["new"]["holds_mean"] <= 0.025


def test_reproduce_add_seeds_keeps_recorded_seeds_and_trains_only_the_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from attnmatch.research.reproduce import reproduce

    _project(tmp_path, monkeypatch)
    runs, results = tmp_path / "runs", tmp_path / "results"
    both = reproduce("tiny", seeds=[1, 2], runs_dir=runs, results_dir=results, progress=False)
    reproduce("tiny", seeds=[1], runs_dir=runs, results_dir=results, progress=False)
    shutil.rmtree(runs / "tiny" / "gated" / "seed-1")  # the recorded seed's run is gone
    merged = reproduce(
        "tiny", seeds=[1, 2], rows=["gated"], runs_dir=runs, results_dir=results,
        progress=False, update=True, add_seeds=True,
    )  # fmt: skip
    assert not (runs / "tiny" / "gated" / "seed-1").exists()  # seed 1 was not trained again
    row = json.loads((results / "tiny.json").read_text())["rows"][1]
    assert row == merged["rows"][1]
    whole = both["rows"][1]
    assert row["seeds"] == [1, 2]
    for key in ("best_epochs", "train_pairs_per_s", "wall_time_s", "commits"):
        assert len(row[key]) == 2
    for section in ("metrics", "dev"):
        for metric, values in whole[section].items():
            assert row[section][metric]["runs"] == pytest.approx(values["runs"])
            assert row[section][metric]["mean"] == pytest.approx(values["mean"])
            assert row[section][metric]["std"] == pytest.approx(values["std"])
    # nothing left to add: the row is kept as it is
    again = reproduce(
        "tiny", seeds=[2], rows=["gated"], runs_dir=runs, results_dir=results,
        progress=False, update=True, add_seeds=True,
    )  # fmt: skip
    assert again["rows"][1] == row


def test_merge_seeds_refuses_shared_seeds_and_changed_experiments() -> None:
    from attnmatch.research.reproduce import merge_seeds

    def row(seeds: list[int], experiment: dict[str, object]) -> dict[str, object]:
        runs = {"map": {"mean": 0.5, "std": 0.0, "runs": [0.5] * len(seeds)}}
        lists = {k: [0] * len(seeds) for k in ("best_epochs", "train_pairs_per_s")}
        lists |= {k: [0] * len(seeds) for k in ("wall_time_s", "commits", "train_time_s")}
        return {"id": "r", "seeds": seeds, "metrics": runs, "per_group": {}, "dev": runs,
                "experiment": experiment, **lists}  # fmt: skip

    with pytest.raises(ValueError, match=r"seeds \[1\] are recorded already"):
        merge_seeds(row([1], {"a": 1}), row([1, 2], {"a": 1}))
    with pytest.raises(ValueError, match="another experiment"):
        merge_seeds(row([1], {"a": 1}), row([2], {"a": 2}))
    merged = merge_seeds(row([3], {"a": 1}), row([1], {"a": 1, "added_since": "x"}))
    assert merged["seeds"] == [1, 3]


def test_add_seeds_without_update_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from attnmatch.cli import app

    _project(tmp_path, monkeypatch)
    done = CliRunner().invoke(app, ["reproduce", "tiny", "--rows", "gated", "--add-seeds"])
    assert done.exit_code == 2
    assert "--add-seeds goes with --update and --rows" in " ".join(done.output.split())
