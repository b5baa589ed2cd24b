"""`attnmatch evaluate`, `rank` and `score`: a saved model (or a zero-shot encoder) on texts."""

from __future__ import annotations

import json
import math
import os
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from attnmatch.cli.console import err, out, print_metrics, print_warning
from attnmatch.cli.files import check_output_file, reading, writing
from attnmatch.cli.options import (
    Backend,
    BackendOption,
    DeviceOption,
    Precision,
    PrecisionOption,
    default_run_tag,
    load_model,
    model_device,
    parse_sets,
)
from attnmatch.terminal import shown

if TYPE_CHECKING:  # pragma: no cover
    from attnmatch.matcher import Ranked


def _warn_unknown(matcher: Any, texts: list[str], where: str) -> None:
    """One-line warnings when many tokens of `texts` are unknown to the model's vocabulary
    (`attnmatch.inputs.unknown_note`; silent for inputs that cannot tell) and when some texts
    are longer than the model's bound (`attnmatch.inputs.truncation_note`)."""
    from attnmatch.inputs import truncation_note, unknown_note

    try:
        note = unknown_note(matcher.inputs, texts, where)
    except NotImplementedError:
        note = None
    if note:
        print_warning(note)
    cut = (
        truncation_note(matcher.inputs, texts, where)
        if hasattr(matcher.inputs, "truncated")
        else None
    )
    if cut:
        print_warning(cut)


def evaluate(
    model_dir: Annotated[
        str | None,
        typer.Argument(
            help="A saved model directory, or an encoder (minilm-l6) zero-shot; with --pipeline, "
            "the reranker (optional)."
        ),
    ] = None,
    dataset: Annotated[str, typer.Option(help="NAME:SPLIT, e.g. wikiqa:test.")] = ...,  # type: ignore[assignment]
    filtered: Annotated[
        bool, typer.Option(help="WikiQA: also drop all-correct questions.")
    ] = False,
    dataset_option: Annotated[
        list[str] | None,
        typer.Option(
            "--dataset-option",
            help="A dataset option KEY=VALUE (repeatable), e.g. source=xml, holdout=true.",
        ),
    ] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Dataset folder (default: search).")] = None,
    per_query: Annotated[
        Path | None,
        typer.Option(help="Write per-query (ranking) or per-set (SemEval) rows to this JSONL."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    device: DeviceOption = "cpu",
    precision: PrecisionOption = Precision.fp32,
    pipeline: Annotated[
        str | None,
        typer.Option(
            help="Retrieve, then rerank: bm25, dense or hybrid over a corpus of every candidate "
            "of the split, MODEL_DIR (if given) reranking the top --depth (docs/retrieval.md)."
        ),
    ] = None,
    depth: Annotated[int, typer.Option(help="--pipeline: candidates reranked.")] = 100,
    backend: BackendOption = Backend.auto,
) -> None:
    """Evaluate a saved model on a dataset split under its official protocol.

    SemEval STS splits report Pearson per set and, as "pearson", the pair-weighted mean.
    """
    if pipeline is not None:
        from attnmatch.cli.retrieval import evaluate_pipeline

        evaluate_pipeline(model_dir, dataset, pipeline, depth, data_dir, as_json)
        return
    if model_dir is None:
        raise typer.BadParameter("give the model to evaluate", param_hint="MODEL_DIR")
    from attnmatch.strict_json import dumps_json

    options = parse_sets(dataset_option or [], "--dataset-option")
    if filtered:
        options["filtered"] = True
    if per_query is not None:
        check_output_file(per_query, "--per-query")
    where = model_device(model_dir, device, precision.value, backend)  # exported: no torch
    with reading(model_dir):
        matcher = load_model(model_dir, where, precision, backend)
    with reading(f"--dataset {dataset}"):
        report = matcher.evaluate(dataset, data_dir=data_dir, **options)
    if per_query is not None:
        from attnmatch.atomic import write_text_atomic

        # Strict JSON lines: a value that is not a finite number (undefined) is null.
        rows = "".join(dumps_json(r) + "\n" for r in report.per_query)
        with writing(per_query, "--per-query"):
            write_text_atomic(per_query, rows)
    if as_json:
        # Strict JSON: a metric that is not a finite number (undefined) is null.
        data = report.to_dict() | {"per_query": len(report.per_query)}
        sys.stdout.write(dumps_json(data, indent=2) + "\n")
        return
    print_metrics({dataset: report.metrics}, title=f"{model_dir} on {dataset} ({report.protocol})")
    if "num_queries" in report.metrics:
        out.print(f"{report.metrics['num_queries']} queries, {report.num_pairs} pairs")


def _read_candidates(path: Path | None) -> tuple[list[str], list[int], str]:
    """The candidates of a file, or of stdin when `path` is None or '-'
    (`attnmatch.scoring.read_candidates`: UTF-8, a byte order mark dropped, blank lines
    skipped), their 1-based line numbers in the file, and the name of the source."""
    from attnmatch.scoring import read_candidates

    texts, lines = read_candidates(path)
    return texts, lines, "stdin" if path is None or str(path) == "-" else str(path)


class _RankFormat(StrEnum):
    table = "table"
    json = "json"
    trec = "trec"


def rank(
    model_dir: Annotated[
        str, typer.Argument(help="A saved model directory, or an encoder (minilm-l6) zero-shot.")
    ],
    query: Annotated[str, typer.Option("--query", "-q", help="The query / question.")],
    candidates: Annotated[
        Path | None,
        typer.Option(
            "--candidates",
            "-c",
            help="One candidate per line (default: stdin; '-' also reads stdin).",
        ),
    ] = None,
    top_k: Annotated[
        int | None, typer.Option("--top-k", "-k", min=1, help="Show only the best K (K >= 1).")
    ] = None,
    output_format: Annotated[
        _RankFormat | None,
        typer.Option(
            "--format",
            help="table; json (one JSON object per line); trec (a TREC run: qid Q0 docid rank "
            "score tag, docid = d<line number of the candidate>). Default: table.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The same as --format json.")] = False,
    qid: Annotated[str, typer.Option(help="The query id of --format trec lines.")] = "1",
    tag: Annotated[
        str | None,
        typer.Option(
            help="The run tag of --format trec lines (default: the model directory's name, "
            "the run's for RUN/model, or the encoder's name)."
        ),
    ] = None,
    device: DeviceOption = "cpu",
    precision: PrecisionOption = Precision.fp32,
    backend: BackendOption = Backend.auto,
) -> None:
    """Rank candidates (one per line, from a file or stdin) for a query."""

    if as_json and output_format not in (None, _RankFormat.json):
        raise typer.BadParameter(
            f"--json and --format {output_format.value} disagree; give one", param_hint="--json"
        )
    fmt = _RankFormat.json if as_json else output_format or _RankFormat.table
    run_tag = default_run_tag(model_dir) if tag is None else tag
    for option, value in (("--qid", qid), ("--tag", run_tag)):
        _check_trec_field(value, option)
    if not query.strip():
        raise ValueError("the query is empty: pass --query 'some question'")
    torch_device = model_device(model_dir, device, precision.value, backend)
    texts, lines, source = _read_candidates(candidates)
    if not texts:
        raise ValueError(f"no candidates in {source} (expected one non-empty line per candidate)")
    with reading(model_dir):
        matcher = load_model(model_dir, torch_device, precision, backend)
    _warn_unknown(matcher, [query, *texts], "the query and candidates")
    ranked = matcher.rank(query, texts, top_k=top_k)
    for r in ranked:  # never print a NaN: not a ranking, and not JSON
        if not math.isfinite(r.score):
            raise ValueError(
                f"{source}:{lines[r.index]}: the model scored this candidate {r.score}, not a "
                f"number: {model_dir} may be corrupt (retrain or re-download it)"
            )
    _print_ranked(ranked, lines, fmt, query=query, qid=qid, run_tag=run_tag)


def _check_trec_field(value: str, option: str) -> None:
    """A field of a TREC run line (`--qid`, `--tag`) is one printable word."""
    if not value or len(value.split()) != 1 or value != value.strip() or not value.isprintable():
        raise typer.BadParameter(
            f"a TREC field must be one printable word without spaces, got {value!r}",
            param_hint=option,
        )


def _print_ranked(
    ranked: list[Ranked], lines: list[int], fmt: _RankFormat, *, query: str, qid: str, run_tag: str
) -> None:
    """The ranking on stdout: JSON lines, TREC run lines, or a table."""
    if fmt is _RankFormat.json:
        for i, r in enumerate(ranked, 1):
            row = {"rank": i, "index": r.index, "line": lines[r.index], "score": float(r.score)}
            sys.stdout.write(json.dumps(row | {"text": r.text}, allow_nan=False) + "\n")
        return
    if fmt is _RankFormat.trec:
        for i, r in enumerate(ranked, 1):
            sys.stdout.write(f"{qid} Q0 d{lines[r.index]} {i} {r.score:.8g} {run_tag}\n")
        return
    from rich.table import Table

    table = Table(title=shown(f"query: {query}"))
    table.add_column("rank", justify="right")
    table.add_column("score", justify="right")
    table.add_column("line", justify="right")
    table.add_column("candidate")
    for i, r in enumerate(ranked, 1):
        table.add_row(str(i), f"{r.score:.4f}", str(lines[r.index]), shown(r.text))
    out.print(table)


_FormatOption = Annotated[
    str,
    typer.Option(
        "--format",
        help="tsv (headerless LEFT<TAB>RIGHT lines), tsv-header (a header naming left and "
        'right; other columns are kept), jsonl (objects with "left" and "right"), csv or '
        "parquet (a file with left and right columns). auto: by a .jsonl, .csv or .parquet "
        "name, a JSON first line or a left/right header; any other first line is an error "
        "asking for --format.",
    ),
]
_WorkersOption = Annotated[
    int,
    typer.Option(
        min=1, help="Processes scoring on this machine, each with its own copy of the model."
    ),
]
_ShardOption = Annotated[
    str | None,
    typer.Option(
        help="RANK/WORLD (e.g. 0/4) or torchrun (its RANK and WORLD_SIZE): score one shard "
        "into OUTPUT.parts, resuming a killed run; the last shard to finish merges OUTPUT. "
        "Needs -o on storage every shard reaches.",
    ),
]
_ChunkSizeOption = Annotated[
    int, typer.Option(min=1, help="Pairs read, scored and written at a time.")
]


def score(
    model_dir: Annotated[
        str, typer.Argument(help="A saved model directory, or an encoder (minilm-l6) zero-shot.")
    ],
    pairs_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="PAIRS",
            show_default=False,
            help="The pairs (default: stdin; '-' also reads stdin), in one of the --format "
            "formats; .gz is read as gzip.",
        ),
    ] = None,
    pairs: Annotated[
        Path | None, typer.Option("--pairs", "-p", help="The pairs file, as PAIRS.")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the pairs with their score (and, for classification models, the "
            "predicted label) to this TSV, or JSONL if it ends in .jsonl; default: print one "
            "score per line.",
        ),
    ] = None,
    pairs_format: _FormatOption = "auto",
    workers: _WorkersOption = 1,
    shard: _ShardOption = None,
    chunk_size: _ChunkSizeOption = 2048,
    device: DeviceOption = "cpu",
    precision: PrecisionOption = Precision.fp32,
    backend: BackendOption = Backend.auto,
) -> None:
    """Score text pairs; prints one score per line in input order, or writes a scored file (-o).

    Scores are higher for better matches: relevance (ranking), log P(last class)
    (classification), the predicted similarity (regression). --workers and --shard write the
    bytes one process writes.
    """
    from attnmatch.scoring import PairsFile

    if pairs_file is not None and pairs is not None:
        raise typer.BadParameter("give the pairs once: as PAIRS or --pairs", param_hint="--pairs")
    path = pairs_file if pairs_file is not None else pairs
    if output is not None:
        check_output_file(output, "--output")
        if path is not None and str(path) != "-" and _same_file(path, output):
            raise typer.BadParameter(
                f"{output} is the pairs file itself; write the scores to another file",
                param_hint="--output",
            )
    if shard is not None and (output is None or path is None or str(path) == "-"):
        raise typer.BadParameter("needs a pairs file and -o OUTPUT", param_hint="--shard")
    torch_device = model_device(model_dir, device, precision.value, backend)
    with PairsFile(path, pairs_format) as records, ExitStack() as stack:
        settings = (torch_device, device, precision, backend)
        matcher, scorer = _scorers(stack, model_dir, workers, settings, records.source)
        job = _ScoreJob(matcher, records, path, output, chunk_size, scorer)
        if shard is not None:
            job.shard(shard, model_dir, pairs_format)
        elif output is None:
            job.print()
        else:
            job.write()


def _scorers(
    stack: ExitStack,
    model_dir: str,
    workers: int,
    settings: tuple[Any, str, Precision, Backend],
    source: str,
) -> tuple[Any, Any]:
    """`score`'s model in this process, and its `WorkerPool` when `workers` > 1 (else None),
    both on `settings` (torch device, --device, --precision, --backend) and closed with
    `stack`. On ONNX Runtime the workers and this process load one exported copy."""
    torch_device, device, precision, backend = settings
    with reading(model_dir):
        spec = model_dir
        if workers > 1 and backend is Backend.onnx:
            from attnmatch.bulk import worker_model

            spec = stack.enter_context(
                worker_model(model_dir, backend.value, device, precision.value)
            )
        matcher = load_model(spec, torch_device, precision, backend)
    if workers == 1:
        return matcher, None
    from attnmatch.bulk import WorkerPool

    pool = WorkerPool(
        spec,
        workers,
        device=device,
        precision=precision.value,
        backend=backend.value,
        source=source,
    )
    return matcher, stack.enter_context(pool)


@dataclass(frozen=True)
class _ScoreJob:
    """One `attnmatch score` run: a loaded model, the open pairs and where the scores go."""

    matcher: Any
    records: Any  # scoring.PairsFile
    path: Path | None
    output: Path | None
    chunk_size: int
    scorer: Any  # scoring.ChunkScorer or None (this process)

    def warn(self, chunk: list[Any]) -> None:
        texts = [t for r in chunk for t in (r.left, r.right)]
        _warn_unknown(self.matcher, texts, "the pairs")

    def print(self) -> None:
        from attnmatch.scoring import format_score, score_chunks

        chunks = score_chunks(
            self.matcher, self.records, self.chunk_size, on_first=self.warn, scorer=self.scorer
        )
        for chunk in chunks:
            sys.stdout.write("".join(format_score(v) + "\n" for v in chunk.scores))
            sys.stdout.flush()

    def write(self) -> None:
        from attnmatch.scoring import write_scored

        assert self.output is not None
        write = partial(
            write_scored,
            self.matcher,
            self.records,
            self.output,
            chunk_size=self.chunk_size,
            on_first=self.warn,
            scorer=self.scorer,
        )
        if not err.is_terminal:
            with writing(self.output, "--output"):
                count = write()
        else:
            from rich.progress import MofNCompleteColumn, Progress, TimeElapsedColumn

            columns = (*Progress.get_default_columns(), MofNCompleteColumn(), TimeElapsedColumn())
            with (
                Progress(*columns, console=err, transient=True) as bar,
                writing(self.output, "--output"),
            ):
                task = bar.add_task("scoring pairs", total=_count_lines(self.path))
                count = write(on_chunk=partial(bar.advance, task))
        err.print(
            f"{count} pairs scored into {shown(self.output)}", highlight=False, soft_wrap=True
        )

    def shard(self, text: str, spec: str, pairs_format: str) -> None:
        from attnmatch.bulk import Shard, fingerprint, merge_note, write_shard

        assert self.output is not None and self.path is not None
        try:
            part = Shard.parse(text)
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--shard") from None
        run = fingerprint(self.path, spec, self.chunk_size, pairs_format)
        with writing(self.output, "--output"):
            outcome = write_shard(
                self.matcher,
                self.records,
                self.output,
                part,
                run,
                chunk_size=self.chunk_size,
                scorer=self.scorer,
            )
        resumed = (
            f" (resumed after {outcome.resumed_chunks} chunks)" if outcome.resumed_chunks else ""
        )
        err.print(
            f"shard {part.rank}/{part.world}: {outcome.scored} pairs scored{resumed}; "
            f"{merge_note(self.output, outcome, part)}",
            highlight=False,
            soft_wrap=True,
        )


def _same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` name one existing file (writing b would replace the input a)."""
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _count_lines(path: Path | None) -> int | None:
    """Lines of a plain file (an upper bound of its pairs, for a progress bar); None for stdin
    and .gz files."""
    if path is None or str(path) == "-" or path.name.endswith(".gz"):
        return None
    with path.open("rb") as f:
        return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 20), b""))
