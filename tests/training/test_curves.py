"""`attnmatch plot`: training curves of a run and of a multi-seed folder."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from attnmatch.training import train_seeds
from attnmatch.training.curves import Curve, plot_runs, read_run, seed_mean
from tests.training.test_trainer import tiny_experiment

pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def seeds_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("curves") / "seeds"
    train_seeds(tiny_experiment(epochs=3, floors="none"), out, [1, 2], progress=False)
    return out


def test_plot_writes_a_png_of_a_run_and_of_seeds(
    seeds_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnmatch import cli

    runs = read_run(seeds_folder)
    assert runs.metric == "map" and [c.label for c in runs.seeds] == ["seed-1", "seed-2"]
    single = read_run(seeds_folder / "seed-1")
    assert list(single.seeds[0].epochs) == [1, 2, 3]
    assert np.isfinite(single.seeds[0].dev).all() and np.isfinite(single.seeds[0].train_loss).all()
    png = tmp_path / "curves.png"
    argv = ["attnmatch", "plot", str(seeds_folder), str(seeds_folder / "seed-1"), "-o", str(png)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 0
    assert png.read_bytes()[:8] == PNG_MAGIC


def test_seed_mean_covers_the_epochs_every_seed_ran() -> None:
    a = Curve("a", np.array([1, 2, 3]), np.array([3.0, 2.0, 1.0]), np.array([0.5, 0.6, 0.7]))
    b = Curve("b", np.array([1, 2]), np.array([1.0, 1.0]), np.array([0.7, np.nan]))
    mean = seed_mean([a, b])
    assert list(mean.epochs) == [1, 2]
    assert mean.train_loss.tolist() == [2.0, 1.5]
    assert mean.dev[0] == pytest.approx(0.6) and np.isnan(mean.dev[1])


def test_plot_errors_name_the_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        plot_runs([tmp_path / "missing"], tmp_path / "x.png")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="neither a run folder"):
        plot_runs([tmp_path / "empty"], tmp_path / "x.png")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "log.jsonl").write_text("{not json\n")
    with pytest.raises(ValueError, match=r"log.jsonl, line 1"):
        plot_runs([tmp_path / "bad"], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_plot_cli_names_the_bad_run_not_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.hostile._util import assert_clear_error, run_cli

    (tmp_path / "empty").mkdir()
    outcome = run_cli(["plot", tmp_path / "empty", "-o", tmp_path / "x.png"], capsys)
    line = assert_clear_error(outcome, str(tmp_path / "empty"), "neither a run folder")
    assert "--output" not in line and not (tmp_path / "x.png").exists()
