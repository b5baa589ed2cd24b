"""The hostile-input battery of the command line and the tables: user text printed verbatim, the
error boundary (one line, exit status 2 or 1, never a traceback), options naming the wrong kind
of path, odd option values, strict JSON, table names that would leave their folder, and the
candidates file read as the file is."""

from __future__ import annotations

import errno
import gzip
import io
import json
import math
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from attnmatch import cli, configs
from attnmatch.matcher import Matcher, Ranked
from attnmatch.tasks import Task
from tests.hostile._util import assert_clear_error, assert_clear_exception, run_cli
from tests.models.conftest import tiny_inputs, tiny_model

FIXTURE = Path(__file__).parents[1] / "fixtures" / "pairs_tiny"
ESC = "\x1b"


@pytest.fixture(scope="module")
def ranker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random ranking model that knows w1..w9, saved as RUN/model of a run "faq"."""
    model = tiny_model("mvlstm", num_outputs=1)
    matcher = Matcher(
        model=model.eval(),
        model_type="mvlstm",
        inputs=tiny_inputs(model),
        task=Task(kind="ranking"),
    )
    return matcher.save(tmp_path_factory.mktemp("models") / "faq" / "model")


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _rank(ranker: Path, tmp_path: Path, candidates: str, *args: str) -> list[str]:
    return [
        "rank",
        str(ranker),
        "-q",
        "w1 w2",
        "-c",
        str(_write(tmp_path / "c.txt", candidates)),
        *args,
    ]


def case(case_id: str) -> pytest.MarkDecorator:
    """One case of the battery: a pytest item whose id (`case_id`) starts with its class."""
    return pytest.mark.parametrize("case", [pytest.param(case_id, id=case_id)])


def _strict_json(text: str) -> Any:
    """Parses `text` as JSON that any parser accepts: NaN and Infinity are refused."""

    def refuse(token: str) -> Any:
        raise AssertionError(f"invalid JSON token {token}")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------ c1: never markup, never control


@case("c1-rank-markup-in-candidates")
def test_rank_shows_markup_in_candidates_verbatim(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    texts = "Paris [citation needed] is big\nan unmatched [/quote] here\n[bold]w1[/bold]\n"
    outcome = run_cli(_rank(ranker, tmp_path, texts), capsys)
    assert outcome.code == 0, outcome.stderr
    for text in texts.splitlines():
        assert text in outcome.stdout


@case("c1-rank-markup-in-query")
def test_rank_shows_markup_in_the_query_verbatim(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cands = _write(tmp_path / "c.txt", "w1\nw2\n")
    outcome = run_cli(["rank", ranker, "-q", "[red]w1[/red] [/x]", "-c", cands], capsys)
    assert outcome.code == 0, outcome.stderr
    assert "query: [red]w1[/red] [/x]" in outcome.stdout


@case("c1-rank-emoji-codes")
def test_rank_keeps_emoji_codes_as_typed(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = run_cli(_rank(ranker, tmp_path, "w1 :thumbs_up: :smile:\n"), capsys)
    assert outcome.code == 0, outcome.stderr
    assert "w1 :thumbs_up: :smile:" in outcome.stdout and "\U0001f44d" not in outcome.stdout


@pytest.mark.parametrize(
    "char, shown",
    [
        pytest.param(ESC + "[2J", "\\x1b[2J", id="c1-rank-escape-sequence"),
        pytest.param("\x07", "\\x07", id="c1-rank-bell"),
        pytest.param("\x08\x08", "\\x08\\x08", id="c1-rank-backspace"),
        pytest.param("\r", "\\r", id="c1-rank-carriage-return"),
        pytest.param("\x9b31m", "\\x9b31m", id="c1-rank-c1-csi"),
        pytest.param("\x7f", "\\x7f", id="c1-rank-delete"),
        pytest.param("\u202e", "\\u202e", id="c1-rank-bidi-override"),
        pytest.param("\u2067", "\\u2067", id="c1-rank-bidi-isolate"),
    ],
)
def test_rank_shows_terminal_controls_visibly(
    char: str, shown: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """In a candidate (a carriage return ends a line of a file, so it goes in the query) and
    in the query."""
    in_file = "" if char == "\r" else char
    (tmp_path / "c.txt").write_bytes(f"w1 {in_file}w2\nw3\n".encode())
    outcome = run_cli(["rank", ranker, "-q", f"w1 {char}w9", "-c", tmp_path / "c.txt"], capsys)
    assert outcome.code == 0, outcome.stderr
    assert f"query: w1 {shown}w9" in outcome.stdout
    if in_file:
        assert f"w1 {shown}w2" in outcome.stdout
    assert char not in outcome.stdout + outcome.stderr


@case("c1-rank-json-exact-text")
def test_rank_json_keeps_control_characters_exact(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = f"w1 {ESC}[31mw2\u202e [x]"
    outcome = run_cli(_rank(ranker, tmp_path, text + "\nw3\n", "--json"), capsys)
    assert outcome.code == 0, outcome.stderr
    assert ESC not in outcome.stdout and "\u202e" not in outcome.stdout
    rows = [_strict_json(line) for line in outcome.stdout.splitlines()]
    assert text in [r["text"] for r in rows]


@case("c1-error-line-markup-and-escape")
def test_error_line_with_markup_and_controls(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model folder named with an unmatched closing tag and an ESC sequence: the error line
    shows both as typed / escaped; the terminal receives no ESC."""
    missing = tmp_path / f"m[/quote]{ESC}[2J"
    cands = _write(tmp_path / "c.txt", "w1\n")
    outcome = run_cli(["rank", missing, "-q", "w1", "-c", cands], capsys)
    line = assert_clear_error(outcome, "[/quote]\\x1b[2J")
    assert ESC not in outcome.stderr and line.startswith("error:")


@case("c1-score-output-name-markup")
def test_score_names_its_output_verbatim(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _write(tmp_path / "p.tsv", "w1\tw2\n")
    output = tmp_path / "out [bold]x[/bold].tsv"
    outcome = run_cli(["score", ranker, pairs, "--format", "tsv", "-o", output], capsys)
    assert outcome.code == 0, outcome.stderr
    assert f"1 pairs scored into {output}" in outcome.stderr
    assert output.is_file()


def _table(tmp_path: Path, body: str, name: str = "tiny") -> Path:
    head = (
        f'table = "{name}"\ntitle = "T"\nprotocol = "p"\nmetrics = ["map"]\nseeds = [1]\n'
        '[defaults]\ndata = { dataset = "pairs" }\n'
    )
    return _write(tmp_path / "t.toml", head + body)


ROW = '[[rows]]\nid = "r1"\nlabel = "L"\nmodel = "mvlstm"\nnot_run = "no data"\n'


@case("c1-reproduce-label-markup-and-escape")
def test_reproduce_prints_table_text_verbatim(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = ROW.replace('label = "L"', 'label = "Row [red]one[/red] \\u001b[2J"')
    table = _table(tmp_path, row)
    args = ["reproduce", table, "--runs-dir", tmp_path / "runs", "--results-dir", tmp_path / "res"]
    outcome = run_cli([*args, "--no-progress"], capsys)
    assert outcome.code == 0, outcome.stderr
    assert "Row [red]one[/red] \\x1b[2J" in outcome.stdout
    assert ESC not in outcome.stdout + outcome.stderr
    assert "Row [red]one[/red] \x1b[2J" in (tmp_path / "res" / "tiny.md").read_text("utf-8")


# ------------------------------------------------------------------ c2: the error boundary


@pytest.mark.parametrize(
    "error, needle",
    [
        pytest.param(RecursionError("maximum recursion depth"), "nested", id="c2-recursion-error"),
        pytest.param(MemoryError(), "memory", id="c2-memory-error"),
        pytest.param(
            UnicodeDecodeError("utf-8", b"ab\n\xff", 3, 4, "invalid start byte"),
            "line 2",
            id="c2-unicode-decode-error",
        ),
        pytest.param(zipfile.BadZipFile("File is not a zip file"), "zip", id="c2-bad-zip"),
        pytest.param(gzip.BadGzipFile("Not a gzipped file"), "gzip", id="c2-bad-gzip"),
        pytest.param(EOFError("Compressed file ended"), "ends early", id="c2-eof-error"),
        pytest.param(
            OSError(errno.ENOSPC, "No space left on device"), "no space", id="c2-enospc-read"
        ),
    ],
)
def test_reading_errors_name_the_model(
    error: BaseException,
    needle: str,
    ranker: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Errors that say nothing of their file, raised while a model loads: the line names the
    model folder and what is wrong (typer's EOFError -> "Aborted!" exit 1 included)."""
    import attnmatch.matcher

    def load(spec: object, **options: object) -> Matcher:
        raise error

    monkeypatch.setattr(attnmatch.matcher, "load_matcher", load)
    cands = _write(tmp_path / "c.txt", "w1\n")
    outcome = run_cli(["rank", ranker, "-q", "w1", "-c", cands], capsys)
    assert_clear_error(outcome, str(ranker), needle)


@case("c2-corrupt-safetensors")
def test_corrupt_safetensors_names_the_model(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(ranker, broken)
    (broken / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{garbage")
    cands = _write(tmp_path / "c.txt", "w1\n")
    outcome = run_cli(["rank", broken, "-q", "w1", "-c", cands], capsys)
    assert_clear_error(outcome, str(broken))


@case("c2-model-config-nested-json")
def test_model_config_nested_too_deeply(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    broken = tmp_path / "deep"
    shutil.copytree(ranker, broken)
    (broken / "config.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    cands = _write(tmp_path / "c.txt", "w1\n")
    outcome = run_cli(["rank", broken, "-q", "w1", "-c", cands], capsys)
    assert_clear_error(outcome, str(broken))


@case("c2-permission-error")
def test_permission_error_names_the_file(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import attnmatch.matcher

    secret = tmp_path / "secret-model"

    def load(spec: object, **options: object) -> Matcher:
        raise PermissionError(errno.EACCES, "Permission denied", str(secret / "config.json"))

    monkeypatch.setattr(attnmatch.matcher, "load_matcher", load)
    cands = _write(tmp_path / "c.txt", "w1\n")
    outcome = run_cli(["rank", secret, "-q", "w1", "-c", cands], capsys)
    assert_clear_error(outcome, str(secret / "config.json"), "permission denied")


@case("c2-long-error-one-line")
def test_long_error_is_one_unwrapped_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / ("very-long-folder-name-" * 8) / "model"
    cands = _write(tmp_path / "c.txt", "w1\n")
    outcome = run_cli(["rank", missing, "-q", "w1", "-c", cands], capsys)
    assert_clear_error(outcome, str(missing))
    assert len(outcome.stderr.strip().splitlines()) == 1


@case("c2-usage-error-one-line")
def test_usage_error_is_one_line(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = run_cli(["rank", "-q", "x"], capsys)
    assert_clear_error(outcome, "missing argument", "model_dir")
    assert "╭" not in outcome.stderr  # no rich panel


@pytest.mark.parametrize(
    "how", [pytest.param("option", id="c2-debug-option"), pytest.param("env", id="c2-debug-env")]
)
def test_debug_shows_the_traceback(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--debug and ATTNMATCH_DEBUG=1 print the traceback, then the same line and status."""
    cands = _write(tmp_path / "c.txt", "w1\n")
    args = ["rank", tmp_path / "missing", "-q", "w1", "-c", cands]
    if how == "env":
        monkeypatch.setenv(cli.DEBUG_ENV, "1")
    outcome = run_cli(["--debug", *args] if how == "option" else args, capsys)
    assert outcome.code == 2
    assert "Traceback" in outcome.stderr
    last = outcome.stderr.strip().splitlines()[-1]
    assert last.startswith("error:") and str(tmp_path / "missing") in last


@case("c2-broken-pipe")
def test_a_closed_pipe_exits_quietly(case: str, ranker: Path, tmp_path: Path) -> None:
    """`attnmatch rank ... --json | head -1`: the reader goes away; no traceback, status 0."""
    cands = _write(tmp_path / "c.txt", "".join(f"w{i % 9 + 1} w{i % 7 + 1}\n" for i in range(3000)))
    proc = subprocess.Popen(
        [sys.executable, "-m", "attnmatch", "rank", str(ranker), "-q", "w1", "-c", str(cands)]
        + ["--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `head -1` does
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, stderr
    assert json.loads(first)["rank"] == 1
    assert stderr == ""


@case("c2-per-query-is-a-folder")
def test_per_query_naming_a_folder(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["evaluate", ranker, "--dataset", "pairs:test", "--data-dir", FIXTURE]
    outcome = run_cli([*args, "--per-query", tmp_path], capsys)
    assert_clear_error(outcome, "--per-query", str(tmp_path), "folder")


@case("c2-score-output-is-a-folder")
def test_score_output_naming_a_folder(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _write(tmp_path / "p.tsv", "w1\tw2\n")
    (tmp_path / "out").mkdir()
    outcome = run_cli(["score", ranker, pairs, "-o", tmp_path / "out"], capsys)
    assert_clear_error(outcome, "--output", str(tmp_path / "out"), "folder")


@case("c2-train-output-is-a-file")
def test_train_output_naming_a_file(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = _write(tmp_path / "notes.txt", "keep me")
    outcome = run_cli(
        ["train", "--dataset", "pairs", "--data-dir", FIXTURE, "-o", existing], capsys
    )
    assert_clear_error(outcome, "--output", str(existing), "is a file")
    assert existing.read_text(encoding="utf-8") == "keep me"


@case("c2-results-dir-is-a-file")
def test_reproduce_results_dir_naming_a_file(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table(tmp_path, ROW)
    results = _write(tmp_path / "results", "")
    outcome = run_cli(["reproduce", table, "--results-dir", results], capsys)
    assert_clear_error(outcome, "--results-dir", str(results), "is a file")


@case("c2-output-folder-not-writable")
def test_output_in_a_read_only_folder(
    case: str,
    ranker: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A folder this user may not write into (emulated: the tests may run as root)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != locked and real(p, mode))
    pairs = _write(tmp_path / "p.tsv", "w1\tw2\n")
    outcome = run_cli(["score", ranker, pairs, "-o", locked / "scored.tsv"], capsys)
    assert_clear_error(outcome, "--output", str(locked / "scored.tsv"), "permission denied")


@case("c2-disk-full-while-writing")
def test_disk_full_while_writing_per_query(
    case: str,
    ranker: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    target = tmp_path / "rows.jsonl"
    args = ["evaluate", ranker, "--dataset", "pairs:test", "--data-dir", FIXTURE]
    outcome = run_cli([*args, "--per-query", target], capsys)
    assert_clear_error(outcome, "--per-query", str(target), "no space left")
    assert not target.exists() and os.listdir(tmp_path) == []


@case("c2-table-seeds-empty")
def test_table_with_no_seeds(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _write(tmp_path / "t.toml", _table(tmp_path, ROW).read_text().replace("[1]", "[]"))
    outcome = run_cli(["reproduce", table, "--results-dir", tmp_path / "r"], capsys)
    assert_clear_error(outcome, str(table), "seeds")
    assert not (tmp_path / "r").exists()


@case("c2-table-not-utf8")
def test_table_that_is_not_utf8(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "t.toml"
    table.write_bytes(b'table = "x"\ntitle = "T"\nprotocol = "caf\xe9"\n')
    outcome = run_cli(["reproduce", table], capsys)
    assert_clear_error(outcome, f"{table}:3", "utf-8")


@case("c2-table-not-toml")
def test_table_that_is_not_toml(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _write(tmp_path / "t.toml", 'table = "x"\ntitle = \nprotocol = "p"\n')
    outcome = run_cli(["reproduce", table], capsys)
    assert_clear_error(outcome, str(table), "line 2")


@case("c2-table-nested-too-deeply")
def test_table_nested_too_deeply(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _write(tmp_path / "t.toml", "x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    outcome = run_cli(["reproduce", table], capsys)
    assert_clear_error(outcome, str(table), "nested too deeply")


@case("c2-table-huge")
def test_table_too_large(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = _table(tmp_path, ROW)
    with table.open("a", encoding="utf-8") as f:
        f.write("# " + "x" * configs.MAX_CONFIG_BYTES + "\n")
    outcome = run_cli(["reproduce", table], capsys)
    assert_clear_error(outcome, str(table), "bytes")


@case("c2-train-config-not-utf8")
def test_train_config_that_is_not_utf8(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "exp.toml"
    config.write_bytes(b'model = "mvlstm"\n\n# \xff\xfe\n')
    outcome = run_cli(["train", config, "-o", tmp_path / "run"], capsys)
    assert_clear_error(outcome, f"{config}:3", "utf-8")


@case("c2-train-config-nested-too-deeply")
def test_train_config_nested_too_deeply(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _write(tmp_path / "exp.toml", "x = " + "{a=" * 30_000 + "1" + "}" * 30_000 + "\n")
    outcome = run_cli(["train", config, "-o", tmp_path / "run"], capsys)
    assert_clear_error(outcome, str(config), "nested")


@case("c2-candidates-is-a-folder")
def test_candidates_naming_a_folder(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = run_cli(["rank", ranker, "-q", "w1", "-c", tmp_path], capsys)
    assert_clear_error(outcome, str(tmp_path), "folder")


# ------------------------------------------------------------------ c3: runs lost or misreported


@case("c3-verify-mismatch-exit-1")
def test_verify_mismatch_exits_1(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from attnmatch.data.datasets import find_dataset_dir, get_dataset

    copy = tmp_path / "msrp"
    shutil.copytree(find_dataset_dir(get_dataset("msrp"), None), copy)  # the bundled copy
    (copy / "README.brmson.md").write_text("tampered\n", encoding="utf-8")
    outcome = run_cli(["datasets", "verify", "msrp", "--data-dir", copy], capsys)
    assert_clear_error(outcome, "msrp", "README.brmson.md", "differ", code=1)
    assert "mismatch" in outcome.stdout


@case("c3-score-output-is-its-input")
def test_score_output_replacing_its_input(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = _write(tmp_path / "p.tsv", "w1\tw2\n")
    outcome = run_cli(["score", ranker, pairs, "-o", pairs], capsys)
    assert_clear_error(outcome, "--output", str(pairs))
    assert pairs.read_text(encoding="utf-8") == "w1\tw2\n"


@case("c3-reproduce-rows-empty")
def test_reproduce_with_empty_rows(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--rows ''` once meant every row, and overwrote the committed results."""
    table = _table(tmp_path, ROW)
    outcome = run_cli(["reproduce", table, "--rows", "", "--results-dir", tmp_path / "r"], capsys)
    assert_clear_error(outcome, "--rows")
    assert not (tmp_path / "r").exists()


@case("c3-reproduce-rows-twice")
def test_reproduce_with_a_row_given_twice(case: str, tmp_path: Path) -> None:
    from attnmatch.research.reproduce import reproduce

    table = _table(tmp_path, ROW)
    with pytest.raises(ValueError) as info:
        reproduce(table, rows=["r1", "r1"], runs_dir=tmp_path / "runs", progress=False)
    assert_clear_exception(info.value, "r1", "twice")


@case("c3-interrupted-exit-130")
def test_interrupt_exits_130(
    case: str,
    ranker: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import attnmatch.matcher

    def load(spec: object, **options: object) -> Matcher:
        raise KeyboardInterrupt

    monkeypatch.setattr(attnmatch.matcher, "load_matcher", load)
    cands = _write(tmp_path / "c.txt", "w1\n")
    outcome = run_cli(["rank", ranker, "-q", "w1", "-c", cands], capsys)
    assert outcome.code == 130 and outcome.stderr.strip() == "interrupted"


# ------------------------------------------------------------------ c4: odd values, strict JSON


@pytest.mark.parametrize(
    "args, needles",
    [
        pytest.param(["--top-k", "-1"], ["--top-k"], id="c4-top-k-negative"),
        pytest.param(["--top-k", "0"], ["--top-k"], id="c4-top-k-zero"),
        pytest.param(["--qid", "q\x1b1"], ["--qid"], id="c4-qid-control-character"),
    ],
)
def test_rank_refuses_odd_values(
    args: list[str],
    needles: list[str],
    ranker: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outcome = run_cli([*_rank(ranker, tmp_path, "w1\nw2\n"), "--format", "trec", *args], capsys)
    assert_clear_error(outcome, *needles)
    assert outcome.stdout == ""


@pytest.mark.parametrize(
    "args, needles",
    [
        pytest.param(["--seeds", "0"], ["--seeds", "0"], id="c4-seeds-zero"),
        pytest.param(["--seeds", ""], ["--seeds"], id="c4-seeds-empty"),
        pytest.param(["--seeds=-1"], ["--seeds", "-1"], id="c4-seeds-negative"),
        pytest.param(["--seeds", "1,1"], ["--seeds", "twice"], id="c4-seeds-repeated"),
        pytest.param(["--seeds", "100000"], ["--seeds", "100000"], id="c4-seeds-too-many"),
        pytest.param(["--set", "train.lr=nan"], ["--set", "train.lr=nan"], id="c4-set-nan"),
        pytest.param(["--set", "train.lr=[1, inf]"], ["--set", "finite"], id="c4-set-inf-in-list"),
        pytest.param(
            ["--set", "train=1", "--set", "train.lr=2"], ["--set", "train"], id="c4-set-conflict"
        ),
        pytest.param(["--set", "train..lr=2"], ["--set", "train..lr"], id="c4-set-empty-key"),
        pytest.param(["--epochs", "-3"], ["--epochs"], id="c4-epochs-negative"),
    ],
)
def test_train_refuses_odd_values(
    args: list[str], needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    outcome = run_cli(
        ["train", "--dataset", "pairs", "--data-dir", FIXTURE, "-o", run, *args], capsys
    )
    assert_clear_error(outcome, *needles)
    assert not run.exists()


@case("c4-analyze-batch-size-negative")
def test_analyze_refuses_a_negative_batch_size(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", "attention-position", ranker, "-o", tmp_path / "a", "--batch-size", "-2"]
    outcome = run_cli(args, capsys)
    assert_clear_error(outcome, "--batch-size")
    assert list(tmp_path.iterdir()) == []


@case("c4-train-config-nan")
def test_train_config_with_nan(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _write(tmp_path / "exp.toml", 'model = "mvlstm"\n[train]\nlr = nan\n')
    outcome = run_cli(["train", config, "-o", tmp_path / "run"], capsys)
    assert_clear_error(outcome, str(config), "train.lr", "finite")


@case("c4-table-paper-nan")
def test_table_with_a_nan_paper_number(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table(tmp_path, ROW + "paper = { map = nan }\n")
    outcome = run_cli(["reproduce", table], capsys)
    assert_clear_error(outcome, str(table), "rows[0].paper.map", "finite")


@case("c4-rank-nan-score")
def test_rank_never_prints_a_nan_score(
    case: str,
    ranker: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(self: Matcher, query: str, candidates: list[str], top_k: Any = None) -> list[Ranked]:
        return [Ranked(i, t, math.nan if i == 1 else 1.0) for i, t in enumerate(candidates)]

    monkeypatch.setattr(Matcher, "rank", broken)
    outcome = run_cli(_rank(ranker, tmp_path, "w1\n\nw2\n", "--json"), capsys)
    assert_clear_error(outcome, f"{tmp_path / 'c.txt'}:3", "nan")
    assert outcome.stdout == ""


@case("c4-evaluate-json-nan-metric")
def test_evaluate_json_writes_undefined_metrics_as_null(
    case: str,
    ranker: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from attnmatch.evaluation import Report

    def evaluate(self: Matcher, dataset: str, **kwargs: Any) -> Report:
        rows = [{"group": "2015", "pairs": 3, "pearson": math.nan}]
        metrics = {"pearson": math.nan, "spearman": math.inf, "mse": 0.5}
        return Report(metrics, "sts", "pearson", 3, rows)

    monkeypatch.setattr(Matcher, "evaluate", evaluate)
    rows = tmp_path / "rows.jsonl"
    args = ["evaluate", ranker, "--dataset", "pairs:test", "--per-query", rows, "--json"]
    outcome = run_cli(args, capsys)
    assert outcome.code == 0, outcome.stderr
    report = _strict_json(outcome.stdout)
    assert report["metrics"] == {"pearson": None, "spearman": None, "mse": 0.5}
    assert _strict_json(rows.read_text(encoding="utf-8"))["pearson"] is None


# ------------------------------------------------------------------ c5: paths stay in their folder


@pytest.mark.parametrize(
    "name, row_id, field",
    [
        pytest.param("../../escaped", "r1", "table", id="c5-table-name-dotdot"),
        pytest.param("/tmp/escaped", "r1", "table", id="c5-table-name-absolute"),
        pytest.param("sub/escaped", "r1", "table", id="c5-table-name-slash"),
        pytest.param("tiny", "../../escaped", "rows[0].id", id="c5-row-id-dotdot"),
        pytest.param("tiny", "a\\u0000b", "rows[0].id", id="c5-row-id-nul"),
        pytest.param("tiny", "..", "rows[0].id", id="c5-row-id-parent"),
    ],
)
def test_table_names_cannot_leave_their_folder(
    name: str, row_id: str, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table(tmp_path, ROW.replace('id = "r1"', f'id = "{row_id}"'), name=name)
    work = tmp_path / "work"
    args = ["reproduce", table, "--runs-dir", work / "runs", "--results-dir", work / "results"]
    outcome = run_cli(args, capsys)
    assert_clear_error(outcome, str(table), field, "cannot name a file")
    assert not work.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["t.toml"]


@case("c5-inside-refuses-escape")
def test_inside_refuses_a_path_outside(case: str, tmp_path: Path) -> None:
    from attnmatch.research.reproduce import inside

    assert inside(tmp_path, "t", "r") == tmp_path / "t" / "r"
    with pytest.raises(ValueError) as info:
        inside(tmp_path / "runs", "..", "x")
    assert_clear_exception(info.value, "outside", str(tmp_path / "runs"))


@case("c5-sync-text-table-name")
def test_sync_text_refuses_a_table_name_that_leaves(case: str, tmp_path: Path) -> None:
    from attnmatch.research.results_index import sync_text

    table = _table(tmp_path, ROW, name="../outside")
    (tmp_path / "results").mkdir()
    with pytest.raises(configs.ConfigError) as info:
        sync_text(table, tmp_path / "results")
    assert_clear_exception(info.value, str(table), "table", "cannot name a file")


# ------------------------------------------------------------------ c7: errors say where


@case("c7-table-unknown-row-key")
def test_table_unknown_row_key_names_its_path(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table(tmp_path, ROW + ROW.replace('"r1"', '"r2"') + 'modle = "x"\n')
    outcome = run_cli(["reproduce", table], capsys)
    assert_clear_error(outcome, str(table), "rows[1].modle")


@case("c7-table-row-unknown-model")
def test_table_row_with_an_unknown_model(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = _table(tmp_path, ROW.replace('model = "mvlstm"', 'model = "nosuchmodel"'))
    outcome = run_cli(["reproduce", table], capsys)
    assert_clear_error(outcome, str(table), "r1", "nosuchmodel")


@case("c7-results-json-corrupt")
def test_a_corrupt_results_file_is_named(case: str, tmp_path: Path) -> None:
    from attnmatch.research.results_index import load_tables

    _write(tmp_path / "good.json", "{}")
    _write(tmp_path / "bad.json", '{"table": "x",\n "rows": [1,]}')
    with pytest.raises(ValueError) as info:
        load_tables(tmp_path)
    assert_clear_exception(info.value, str(tmp_path / "bad.json"), "line 2")


@case("c7-dataset-option-without-value")
def test_dataset_option_without_a_value(
    case: str, ranker: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["evaluate", ranker, "--dataset", "pairs:test", "--dataset-option", "holdout"]
    outcome = run_cli(args, capsys)
    assert_clear_error(outcome, "--dataset-option", "holdout")


@case("c7-analyze-label-count")
def test_analyze_labels_of_another_count(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", "attention-position", ranker, "-o", tmp_path / "a"]
    outcome = run_cli([*args, "--label", "one", "--label", "two"], capsys)
    assert_clear_error(outcome, "--label", "2 labels for 1")


@case("c7-candidates-not-utf8-line")
def test_candidates_not_utf8_names_the_line(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cands = tmp_path / "c.txt"
    cands.write_bytes(b"w1\nw2\ncaf\xe9\n")
    outcome = run_cli(["rank", ranker, "-q", "w1", "-c", cands], capsys)
    assert_clear_error(outcome, f"{cands}:3", "utf-8")


# ------------------------------------------------------------------ c8: side effects, BOM


@case("c8-candidates-bom")
def test_candidates_bom_is_dropped_and_lines_kept(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cands = tmp_path / "c.txt"
    cands.write_bytes(b"\xef\xbb\xbfw1 w2\n\nw3\n")
    outcome = run_cli(["rank", ranker, "-q", "w1", "-c", cands, "--json"], capsys)
    assert outcome.code == 0, outcome.stderr
    rows = {r["line"]: r["text"] for r in map(_strict_json, outcome.stdout.splitlines())}
    assert rows == {1: "w1 w2", 3: "w3"}


@case("c8-candidates-stdin-bom")
def test_candidates_on_stdin_bom_is_dropped(
    case: str,
    ranker: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfw1\nw2 w3\n"), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    outcome = run_cli(["rank", ranker, "-q", "w1", "--format", "trec", "--tag", "t"], capsys)
    assert outcome.code == 0, outcome.stderr
    assert sorted(line.split()[2] for line in outcome.stdout.splitlines()) == ["d1", "d2"]
    assert "\ufeff" not in outcome.stdout


@case("c8-candidates-other-line-breaks")
def test_candidates_keep_the_files_line_numbers(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A form feed or U+2028 inside a candidate does not end its line: TREC docids are the
    line numbers an editor shows."""
    cands = _write(tmp_path / "c.txt", "w1\x0cw2\nw3\u2028w4\nw5\n")
    outcome = run_cli(["rank", ranker, "-q", "w1", "-c", cands, "--format", "trec"], capsys)
    assert outcome.code == 0, outcome.stderr
    assert sorted(line.split()[2] for line in outcome.stdout.splitlines()) == ["d1", "d2", "d3"]


@case("c8-rank-leaves-torch-settings")
def test_rank_leaves_torch_settings_as_they_were(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    threads, grad = torch.get_num_threads(), torch.is_grad_enabled()
    outcome = run_cli(_rank(ranker, tmp_path, "w1\nw2\n"), capsys)
    assert outcome.code == 0, outcome.stderr
    assert (torch.get_num_threads(), torch.is_grad_enabled()) == (threads, grad)


@case("c6-rank-warns-of-cut-texts")
def test_rank_warns_once_when_texts_are_longer_than_the_bound(
    case: str, ranker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long = " ".join(["w1"] * 600)  # the tiny model keeps 512 tokens per text
    outcome = run_cli(_rank(ranker, tmp_path, f"w3 w4\n{long}\n"), capsys)
    assert outcome.code == 0, outcome.stderr
    warnings = [line for line in outcome.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, outcome.stderr
    assert "1 of the 3 distinct texts" in warnings[0] and "512 tokens" in warnings[0]


@case("c2-python-warning-is-one-line")
def test_a_library_warning_is_one_warning_line(
    case: str,
    ranker: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import warnings

    def warn_then_load(path: Any, **options: Any) -> Matcher:
        warnings.warn(
            "vectors cover 10% of the vocabulary\n(check lowercase)", UserWarning, stacklevel=2
        )
        return Matcher.load(path, **options)

    monkeypatch.setattr("attnmatch.matcher.load_matcher", warn_then_load)
    outcome = run_cli(_rank(ranker, tmp_path, "w3 w4\n"), capsys)
    assert outcome.code == 0, outcome.stderr
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert lines == ["warning: vectors cover 10% of the vocabulary (check lowercase)"], lines


@pytest.mark.parametrize(
    ("flag", "replacement"),
    [
        pytest.param("--embeddings", "--inputs", id="c7-cli-old-flag-embeddings"),
        pytest.param("--encoder=minilm-l6", "--inputs", id="c7-cli-old-flag-encoder"),
    ],
)
def test_an_old_flag_names_its_replacement(
    flag: str, replacement: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["train", *flag.split(" "), *(["glove-6b-50d"] if "=" not in flag else [])]
    outcome = run_cli([*args, "-o", tmp_path / "run"], capsys)
    assert_clear_error(outcome, flag.partition("=")[0], f"is now {replacement}")
    assert not (tmp_path / "run").exists()
