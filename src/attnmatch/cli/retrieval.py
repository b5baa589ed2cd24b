"""`attnmatch index` and `attnmatch search`: retrieve from a corpus, then rerank."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from attnmatch.cli.console import out
from attnmatch.cli.files import reading
from attnmatch.cli.options import DeviceOption, Precision, PrecisionOption, checked_device
from attnmatch.terminal import shown


class _FirstStage(StrEnum):
    bm25 = "bm25"
    dense = "dense"
    hybrid = "hybrid"


def index(
    corpus: Annotated[
        Path | None,
        typer.Argument(
            help="Passages: one a line, or .tsv / .jsonl with id and text (.gz too). "
            "Optional with --rebuild."
        ),
    ] = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="The index folder.")] = Path(
        "index"
    ),
    dense: Annotated[
        str | None,
        typer.Option(help="Also a dense index of this encoder's vectors, e.g. minilm-l6."),
    ] = None,
    add: Annotated[
        bool, typer.Option("--add", help="Add the corpus's passages to the index at --output.")
    ] = False,
    rebuild: Annotated[
        bool,
        typer.Option(
            "--rebuild",
            help="Build the index at --output again (from CORPUS if given, else from its own "
            "passages), e.g. after an upgrade of attnmatch.",
        ),
    ] = False,
) -> None:
    """Index a corpus for `attnmatch search`: BM25, and dense vectors with --dense."""
    from attnmatch.retrieval import index as index_files

    if add and rebuild:
        raise typer.BadParameter("--add and --rebuild exclude each other", param_hint="--add")
    if corpus is None and not rebuild:
        raise typer.BadParameter("give the corpus file to index", param_hint="CORPUS")
    if add:
        if dense is not None:
            raise typer.BadParameter(
                "--add keeps the index's dense encoder; change it with --rebuild",
                param_hint="--dense",
            )
        assert corpus is not None
        info = index_files.add_to_index(corpus, output)
    elif rebuild:
        if corpus is not None:
            passages = index_files.read_corpus(corpus)
            source = {"file": corpus.name, "sha256": index_files.file_digest(corpus)}
            info = index_files.write_index(output, passages, dense_source=dense, sources=[source])
        else:
            info = index_files.rebuild_index(output, dense_source=dense)
    else:
        assert corpus is not None
        info = index_files.build_index(corpus, output, dense_source=dense)
    kind = f", dense: {info.dense_source}" if info.dense_source else ""
    out.print(shown(f"{info.num_passages:,} passages indexed in {info.path} (BM25{kind})"))


def search(
    index_dir: Annotated[Path, typer.Argument(help="An index folder (attnmatch index).")],
    query: Annotated[str, typer.Option("--query", "-q", help="The query.")],
    rerank: Annotated[
        str | None,
        typer.Option(
            help="Rerank the candidates with this model (a saved model, minilm-l6, bm25)."
        ),
    ] = None,
    first_stage: Annotated[
        _FirstStage | None,
        typer.Option(help="bm25, dense or hybrid (default: hybrid with dense vectors, else bm25)."),
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", help="Results shown.")] = 10,
    depth: Annotated[int, typer.Option(help="Candidates the first stage passes on.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per line.")] = False,
    device: DeviceOption = "cpu",
    precision: PrecisionOption = Precision.fp32,
) -> None:
    """Search an index for a query: a first stage, then a reranking model if given."""
    from attnmatch.retrieval.search import check_depths, check_query, load_index

    check_query(query)
    check_depths(depth, top_k)
    stage = None if first_stage is None else first_stage.value
    reranker = None
    if rerank is not None:
        from attnmatch.matcher import load_matcher

        with reading(rerank):
            reranker = load_matcher(
                rerank, device=checked_device(device, precision.value), precision=precision.value
            )
    with reading(index_dir):
        loaded = load_index(index_dir, load_encoder=stage != "bm25")
    hits = loaded.search(query, reranker=reranker, first_stage=stage, top_k=top_k, depth=depth)
    if as_json:
        for rank, h in enumerate(hits, 1):
            row = {
                "rank": rank,
                "id": h.id,
                "score": h.score,
                "first_stage_rank": h.first_stage_rank,
                "text": h.text,
            }
            sys.stdout.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
        return
    from rich.table import Table

    table = Table(title=shown(f"query: {query}"))
    for column in ("rank", "score", "id", "passage"):
        table.add_column(column, justify="right" if column in ("rank", "score") else "left")
    for rank, h in enumerate(hits, 1):
        table.add_row(str(rank), f"{h.score:.4f}", shown(h.id), shown(h.text))
    out.print(table)


def evaluate_pipeline(
    reranker: str | None,
    dataset: str,
    first_stage: str,
    depth: int,
    data_dir: Path | None,
    as_json: bool,
) -> None:
    """`attnmatch evaluate [MODEL] --pipeline STAGE --dataset NAME:SPLIT`: a temporary index of
    the split's corpus (`attnmatch.retrieval.evaluate`), searched for each query."""
    import tempfile

    from attnmatch.retrieval.evaluate import METRICS, benchmark_corpus
    from attnmatch.retrieval.evaluate import evaluate_pipeline as measure
    from attnmatch.retrieval.index import write_index
    from attnmatch.retrieval.search import FIRST_STAGES, check_depths, load_index

    if first_stage not in FIRST_STAGES:
        raise typer.BadParameter(
            f"{first_stage!r} is not one of {', '.join(FIRST_STAGES)}", param_hint="--pipeline"
        )
    check_depths(depth, 1)
    matcher = None
    if reranker is not None:
        from attnmatch.matcher import load_matcher

        with reading(reranker):
            matcher = load_matcher(reranker)
    with reading(f"--dataset {dataset}"):
        bench = benchmark_corpus(dataset, data_dir)
    dense_source = None if first_stage == "bm25" else "minilm-l6"
    with tempfile.TemporaryDirectory() as tmp:
        write_index(Path(tmp) / "index", bench.passages, dense_source=dense_source)
        index = load_index(Path(tmp) / "index")
        metrics = measure(index, bench, first_stage=first_stage, reranker=matcher, depth=depth)
    if as_json:
        sys.stdout.write(json.dumps(metrics | {"passages": len(bench.passages)}) + "\n")
        return
    name = first_stage + (f" > {reranker}" if reranker else "")
    out.print(
        shown(
            f"{name} on {dataset}: {len(bench.passages):,} passages, "
            f"{int(metrics['num_queries'])} queries"
        )
    )
    for metric in METRICS:
        out.print(f"{metric:12s} {metrics[metric]:.4f}")
