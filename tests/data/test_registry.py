"""Every registered corpus: a complete spec, checksums that agree with the bundled SHA256SUMS,
`datasets verify` passing on the bundled data, and the `datasets` commands."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attnmatch.cli import app, console
from attnmatch.data.datasets import (
    fetch_dataset,
    get_dataset,
    list_datasets,
    load_split,
    split_availability,
    verify_dataset,
)
from attnmatch.data.datasets._spec import DatasetSpec, download_dataset, verify_files
from attnmatch.tasks import Task

DATA = Path(__file__).parents[2] / "data"
runner = CliRunner()

# Every benchmark of the five papers (and the STS companions), by registry name.
EXPECTED = {
    "wikiqa",
    "trecqa",
    "sick",
    "sick-entailment",
    "sts-benchmark",
    "semeval-sts",
    "msrp",
    "quora",
    "quora-original",
    "scitail",
    "scitail-re2",
    "snli",
    "multinli",
    "insuranceqa",
    "ubuntu",
    "ubuntu-v1",
    "twitter-cs",
}
# Present in the repository's data/ folder (at least one split).
BUNDLED = {
    "wikiqa",
    "trecqa",
    "sick",
    "sick-entailment",
    "sts-benchmark",
    "semeval-sts",
    "msrp",
    "quora",
    "scitail",
    "scitail-re2",
    "snli",
}
SPECS = list_datasets()


def test_every_corpus_is_registered() -> None:
    assert {s.name for s in SPECS} == EXPECTED


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec_is_complete(spec: DatasetSpec) -> None:
    assert spec.title and spec.license and spec.citation and spec.url and spec.protocol_description
    assert set(spec.split_sizes) <= set(spec.splits)
    names = [f.name for f in spec.files]
    assert len(names) == len(set(names)), "a file is declared twice"
    for f in spec.files:
        for _, digest in f.candidates:
            assert digest == "" or re.fullmatch(r"[0-9a-f]{64}", digest), f.name
    for split in spec.splits:
        try:
            protocol = spec.protocol(split)
        except ValueError:  # a split that needs a non-default option (e.g. semeval holdout)
            continue
        assert protocol is not None and Task.of(protocol) == spec.task
        assert protocol.primary in protocol.metrics
        if split in spec.non_standard_splits:
            assert "non-standard" in protocol.name


def _sha256sums(folder: Path) -> dict[str, str]:
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.lstrip("*").removeprefix("./")] = digest
    return sums


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_copy_verifies_and_agrees_with_its_sha256sums(name: str) -> None:
    spec = get_dataset(name)
    folder = DATA / spec.folder
    assert (folder / "BUNDLED.md").is_file()
    checks = verify_dataset(name, DATA)
    assert not [c for c in checks if c.status in ("mismatch", "unverified")]
    present = [c for c in checks if c.status == "ok"]
    assert present, "nothing bundled"
    sums = _sha256sums(folder)
    for f in spec.files:
        if (folder / f.name).is_file():
            assert sums.get(f.name) == f.sha256, f"{f.name}: spec and SHA256SUMS disagree"
    # Every bundled file is known to the spec (nothing unchecked rides along).
    declared = {n for f in spec.files for n, _ in f.candidates}
    others = {s.folder: s for s in SPECS if s.folder == spec.folder and s is not spec}
    for other in others.values():
        declared |= {n for f in other.files for n, _ in f.candidates}
    undeclared = sorted(set(sums) - declared - {"BUNDLED.md"})
    assert not undeclared or all(n.endswith((".md", ".txt", ".html", ".pdf")) for n in undeclared)


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_bundled_splits_match_split_availability(name: str) -> None:
    available = split_availability(name, DATA)
    assert any(available.values())


@pytest.mark.parametrize("name", sorted(EXPECTED - BUNDLED))
def test_unavailable_corpora_are_reported_as_such(name: str) -> None:
    assert not any(split_availability(name, DATA).values())


@pytest.fixture(autouse=True)
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(console.out, "width", 200)


def test_cli_datasets_list_shows_every_corpus_and_what_is_local() -> None:
    result = runner.invoke(app, ["datasets", "list", "--data-dir", str(DATA)])
    assert result.exit_code == 0, result.output
    for name in EXPECTED:
        assert name in result.output
    assert "partial" in result.output  # e.g. quora: dev and test only
    assert "non-standard" in result.output  # train-on-dev splits are labelled


def test_cli_datasets_info() -> None:
    result = runner.invoke(app, ["datasets", "info", "trecqa"])
    assert result.exit_code == 0, result.output
    assert "raw-test" in result.output and "license" in result.output
    assert "cite" in result.output


def test_cli_datasets_verify_passes_on_the_bundled_data() -> None:
    result = runner.invoke(app, ["datasets", "verify", "--data-dir", str(DATA)])
    assert result.exit_code == 0, result.output
    assert "mismatch" not in result.output


def test_fetch_of_a_plain_file_without_a_published_digest(tmp_path: Path) -> None:
    """A download that is the data file itself (no archive) is copied and accepted, its file
    reported "unverified" because no sha256 is published (file:// URL, no network)."""
    source = tmp_path / "src" / "quora_duplicate_questions.tsv"
    source.parent.mkdir()
    source.write_bytes(
        (Path(__file__).parents[1] / "fixtures" / "quora" / source.name).read_bytes()
    )
    spec = dataclasses.replace(get_dataset("quora-original"), url=source.as_uri())
    folder = download_dataset(spec, tmp_path / "dest")
    assert (folder / source.name).read_bytes() == source.read_bytes()
    assert [c.status for c in verify_files(spec, folder)] == ["unverified"]
    assert load_split("quora-original", "all", data_dir=folder).examples


def test_fetch_explains_manual_downloads() -> None:
    with pytest.raises(ValueError, match="cannot be fetched automatically: Kaggle needs"):
        fetch_dataset("twitter-cs")
