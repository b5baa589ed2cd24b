"""ONNX export and the ONNX Runtime backend (`attnmatch.export`, `export_onnx`,
`Matcher.load(backend=)`, `attnmatch export`, `--backend`), on a tiny random BERT."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attnmatch import Matcher
from attnmatch.data.datasets import load_split
from attnmatch.data.schema import Example
from attnmatch.export import EXACT_ATOL, INT8, export_onnx, is_exported
from attnmatch.export.runtime import OnnxModel
from attnmatch.tasks import RankingTask, Task
from tests.models.conftest import tiny_inputs, tiny_model
from tests.tiny_transformer import WORDS, write_tiny_encoder

PAIRS = [
    ("how are glacier caves formed ?", "a glacier cave is a cave formed in the ice"),
    ("what year did the war end", "it ended in 1945 ."),
    ("man plays guitar", "a dog runs"),
    ("ice", "water melts"),
]


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bert")


@pytest.fixture(scope="module")
def bi(encoder_dir: Path) -> Matcher:
    return Matcher.from_encoder(str(encoder_dir))


@pytest.fixture(scope="module")
def cross(encoder_dir: Path) -> Matcher:
    inputs = {"kind": "transformer", "source": str(encoder_dir), "trainable": True}
    return Matcher.untrained("cross_encoder", inputs=inputs, task=RankingTask(), seed=3)


@pytest.fixture(scope="module")
def crosses(encoder_dir: Path, cross: Matcher) -> dict[str, Matcher]:
    """The cross-encoder with each head `pooling` offers (`[CLS]`, the mean of the states, the
    bi-encoder's cosine of each text's mean), that with a classifier, and late interaction."""
    inputs = {"kind": "transformer", "source": str(encoder_dir), "trainable": True}

    def built(task: Task, **overrides: object) -> Matcher:
        return Matcher.untrained(
            "cross_encoder", inputs=inputs, task=task, overrides=overrides, seed=3
        )

    return {
        "cross": cross,
        "cross-mean": built(RankingTask(), pooling="mean"),
        "cross-segments": built(RankingTask(), pooling="segments", scale=20.0),
        "cross-segments-classes": built(
            Task(kind="classification", num_classes=3), pooling="segments"
        ),
        "cross-late": built(
            RankingTask(), pooling="segments", separate_layers=1, cross_bias=-1.0, scale=20.0
        ),
    }


@pytest.fixture(scope="module")
def exported(
    bi: Matcher, crosses: dict[str, Matcher], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("onnx")
    return {
        "bi": export_onnx(bi, out / "bi"),
        "bi-int8": export_onnx(bi, out / "bi-int8", quantize="int8"),
        **{name: export_onnx(m, out / name) for name, m in crosses.items()},
    }


def _benchmark_pairs(name: str, n: int) -> list[tuple[str, str]]:
    """The first `n` test pairs of a bundled benchmark, with the tiny vocabulary's words mixed
    in so that the tiny tokenizer gives more than unknown pieces."""
    examples = load_split(name, "test").examples[:n]
    rng = np.random.default_rng(0)
    words = np.array(WORDS)
    return [
        (
            f"{e.left[:80]} {' '.join(rng.choice(words, 3))}",
            f"{' '.join(rng.choice(words, 5))} {e.right[:120]}",
        )
        for e in examples
    ]


@pytest.mark.parametrize("name", ["wikiqa", "sts-benchmark", "quora"])
def test_fp32_export_equals_torch_on_benchmark_pairs(
    name: str, bi: Matcher, crosses: dict[str, Matcher], exported: dict[str, Path]
) -> None:
    pairs = _benchmark_pairs(name, 60)
    for key, torch_matcher in {"bi": bi, **crosses}.items():
        onnx_matcher = Matcher.load(exported[key], batch_size=16)
        assert onnx_matcher.backend == "onnx" and isinstance(onnx_matcher.model, OnnxModel)
        got, want = onnx_matcher.outputs(pairs), torch_matcher.outputs(pairs)
        outputs = 3 if key.endswith("classes") else 1
        assert got.shape == want.shape == (len(pairs), outputs)
        np.testing.assert_allclose(got, want, rtol=0, atol=EXACT_ATOL)
        assert not np.allclose(want, want[0])  # the pairs score differently: a real check


def test_exported_directory_keeps_the_metadata_and_needs_no_weights(
    bi: Matcher, exported: dict[str, Path]
) -> None:
    path = exported["bi"]
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "tokenizer.json", "onnx.json", "text.onnx", "head.onnx"} <= names
    assert "model.safetensors" not in names and is_exported(path)
    header = json.loads((path / "config.json").read_text())
    assert header["model_type"] == "bi_encoder" and header["task"]["kind"] == "ranking"
    loaded = Matcher.load(path)
    assert list(loaded.model.parameters()) == []  # no torch model was built
    assert loaded.task.kind == bi.task.kind and loaded.num_outputs == bi.num_outputs
    assert loaded.inputs is not None and loaded.inputs.tokens("ice") == bi._inputs().tokens("ice")
    assert not loaded.explains
    ranked = loaded.rank(PAIRS[0][0], [b for _, b in PAIRS])
    assert [r.index for r in ranked] == [
        r.index for r in bi.rank(PAIRS[0][0], [b for _, b in PAIRS])
    ]


def test_int8_export_is_quantised_and_close(bi: Matcher, exported: dict[str, Path]) -> None:
    import onnx

    graph = onnx.load(str(exported["bi-int8"] / "text.onnx")).graph
    ops = {node.op_type for node in graph.node}
    assert "DynamicQuantizeLinear" in ops or "MatMulInteger" in ops
    manifest = json.loads((exported["bi-int8"] / "onnx.json").read_text())
    assert manifest["quantize"] == "int8" and manifest["int8"] == INT8
    # per output channel: a scale per column of each quantised weight, not one per tensor
    scales = [t for t in graph.initializer if t.name.endswith("_scale") and len(t.dims) == 1]
    assert scales and all(t.dims[0] > 1 for t in scales)
    int8 = Matcher.load(exported["bi-int8"]).score(PAIRS)
    fp32 = bi.score(PAIRS)
    assert np.isfinite(int8).all() and np.abs(int8 - fp32).max() < 0.1


def test_backends_load_and_refuse_clearly(
    encoder_dir: Path, bi: Matcher, exported: dict[str, Path], tmp_path: Path
) -> None:
    saved = bi.save(tmp_path / "torch-model")
    assert Matcher.load(saved).backend == "torch"  # auto: a model directory runs on torch
    on_onnx = Matcher.load(saved, backend="onnx")  # exported on load, in float32
    assert on_onnx.backend == "onnx"
    np.testing.assert_allclose(on_onnx.score(PAIRS), bi.score(PAIRS), atol=EXACT_ATOL)
    with pytest.raises(ValueError, match="exported directory"):
        Matcher.load(exported["bi"], backend="torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        Matcher.load(saved, backend="tensorrt")
    with pytest.raises(ValueError, match="CPU in fp32"):
        Matcher.load(exported["bi"], precision="bf16")
    with pytest.raises(ValueError, match="copy its directory"):
        on_onnx.save(tmp_path / "again")
    with pytest.raises(ValueError, match="quantize must be"):
        export_onnx(bi, tmp_path / "x", quantize="int4")
    with pytest.raises(ValueError, match="int8 takes"):
        export_onnx(bi, tmp_path / "x", quantize="int8", int8={"per_row": True})
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not replacing it"):
        export_onnx(bi, tmp_path / "busy")
    with pytest.raises(ValueError, match="no weights to export"):
        export_onnx(Matcher.from_lexical("overlap"), tmp_path / "lex")


def test_a_damaged_manifest_is_one_line_naming_the_file(
    exported: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    copy = Path(shutil.copytree(exported["bi"], tmp_path / "copy"))
    (copy / "onnx.json").write_text(
        json.dumps(
            {
                "format": "attnmatch.onnx/1",
                "form": "pairs",
                "graphs": {"pairs": "pairs.onnx"},
                "quantize": None,
            }
        )
    )
    with pytest.raises(FileNotFoundError, match="pairs.onnx"):
        Matcher.load(copy)
    (copy / "onnx.json").write_text('{"format": "attnmatch.onnx/1", "form": "stack"}')
    with pytest.raises(ValueError, match=r"onnx\.json: field 'form'"):
        Matcher.load(copy)


def test_a_model_whose_forward_decides_from_values_is_refused(tmp_path: Path) -> None:
    """ARC-I pads its texts to a width read from the batch: its traced graph fails on other
    lengths and is refused in one line naming why (the seed models export: tests/export)."""
    model = tiny_model("arc_i")
    matcher = Matcher(
        model=model.eval(),
        model_type="arc_i",
        inputs=tiny_inputs(model),
        task=Task(kind="ranking"),
    )
    with pytest.raises(ValueError, match="ARCI model does not export to ONNX: its traced graph"):
        export_onnx(matcher, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_cli_export_then_score_on_onnx(bi: Matcher, tmp_path: Path) -> None:
    model = bi.save(tmp_path / "model")
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{a}\t{b}\n" for a, b in PAIRS))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "attnmatch", *args],
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )

    done = run("export", str(model), "--format", "onnx", "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    done = run("score", str(tmp_path / "out"), str(pairs), "--format", "tsv", "--backend", "onnx")
    assert done.returncode == 0, done.stderr
    scores = np.array([float(x) for x in done.stdout.split()])
    np.testing.assert_allclose(scores, bi.score(PAIRS), atol=1e-5)
    done = run("score", str(tmp_path / "out"), str(pairs), "--format", "tsv", "--backend", "torch")
    assert done.returncode != 0 and "exported directory" in done.stderr


def _with_dropout(encoder_dir: Path, folder: Path) -> Path:
    """A copy of the tiny encoder with dropout in its config, as MiniLM's (0.1): a fine-tuned
    (trainable) encoder runs it in training, a frozen one never does."""
    copy = Path(shutil.copytree(encoder_dir, folder))
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    config |= {"hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
    (copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return copy


def test_a_fine_tuned_bi_encoder_exports_and_equals_torch(
    encoder_dir: Path, tmp_path: Path
) -> None:
    """The wrappers of the graphs were left in training mode, and the exporter put them back
    in it: a trainable encoder's dropout was then on when the export compared with `forward`
    (MiniLM fine-tuned by `attnmatch train`: "differs from forward by 8.27")."""
    inputs = {"kind": "transformer", "source": str(_with_dropout(encoder_dir, tmp_path / "e"))}
    trained = Matcher.untrained(
        "bi_encoder",
        inputs={**inputs, "trainable": True},
        task=RankingTask(),
        overrides={"scale": 20.0},
        seed=3,
    )
    trained = Matcher.load(trained.save(tmp_path / "model"))
    exported = Matcher.load(export_onnx(trained, tmp_path / "onnx"))
    pairs = _benchmark_pairs("wikiqa", 40)
    np.testing.assert_allclose(
        exported.outputs(pairs), trained.outputs(pairs), rtol=0, atol=EXACT_ATOL * 20
    )
    assert not trained.model.training  # the caller's model is left as it was


def test_a_recurrent_model_with_dropout_exports_when_its_graph_equals_forward(
    tmp_path: Path,
) -> None:
    """IARNN-GATE (dropout 0.3) traces to a graph equal to `forward`: it was refused only
    because the export ran `forward` with dropout on."""
    model = tiny_model("iarnn", variant="iarnn_gate", dropout=0.3)
    matcher = Matcher(
        model=model.eval(), model_type="iarnn", inputs=tiny_inputs(model), task=RankingTask()
    )
    exported = Matcher.load(export_onnx(matcher, tmp_path / "onnx"))
    pairs = [(a, b) for a, b in PAIRS] + [("w1 w2 w3 w4 w5 w6", "w2")]
    np.testing.assert_allclose(
        exported.outputs(pairs), matcher.outputs(pairs), rtol=0, atol=EXACT_ATOL
    )


def test_a_bi_encoder_with_exact_match_features_exports_as_one_pairs_graph(
    encoder_dir: Path, tmp_path: Path
) -> None:
    """`WithOverlapFeatures` around a fine-tuned bi-encoder: its towers and head inside one
    pairs graph with the features (which read both texts), equal to `forward`."""
    import torch

    from attnmatch.nn.overlap import WithOverlapFeatures

    inputs = {"kind": "transformer", "source": str(_with_dropout(encoder_dir, tmp_path / "e"))}
    matcher = Matcher.untrained(
        "bi_encoder", inputs={**inputs, "trainable": True}, task=RankingTask(), seed=3
    )
    matcher.model = WithOverlapFeatures(matcher.model, 1, torch.rand(40))
    with torch.no_grad():
        matcher.model.head.weight.normal_()
    matcher = Matcher.load(matcher.save(tmp_path / "model"))
    exported = export_onnx(matcher, tmp_path / "onnx")
    assert json.loads((exported / "onnx.json").read_text())["form"] == "pairs"
    pairs = _benchmark_pairs("wikiqa", 30) + [("ice water", "water melts in the ice")]
    got, want = Matcher.load(exported).outputs(pairs), matcher.outputs(pairs)
    np.testing.assert_allclose(got, want, rtol=0, atol=EXACT_ATOL)
    assert not np.allclose(want, want[0])


def test_pack_pair_ids_packs_as_the_model_does() -> None:
    """The runtime's numpy packing equals `pack_pairs` (the model's, in torch) on texts of
    many lengths, empty ones and pairs cut at max_length among them."""
    import torch

    from attnmatch.data.collate import pad_ids
    from attnmatch.models.pretrained import pack_pairs
    from attnmatch.runtime.graphs import pack_pair_ids

    rng = np.random.default_rng(0)
    texts = [rng.integers(5, 40, size=n) for n in (0, 1, 2, 3, 7, 12, 20, 31)]
    pairs = [(a, b) for a in range(len(texts)) for b in range(len(texts))]
    left, right = [texts[a] for a, _ in pairs], [texts[b] for _, b in pairs]
    for max_length in (2, 9, 24, 64):
        got = pack_pair_ids(left, right, max_length)
        want = pack_pairs(*pad_ids(left), *pad_ids(right), max_length)
        for g, w in zip(got, want, strict=True):
            assert g.shape == tuple(w.shape)
            np.testing.assert_array_equal(g, w.numpy())
        cut = [len(a) + max(len(b) - 1, 0) > max_length for a, b in zip(left, right, strict=True)]
        assert any(cut) == (max_length < 61) and not all(cut)  # 31 + 30 tokens fit in 64
    assert torch.is_tensor(want[0])


def test_a_cross_encoder_exports_over_packed_pairs_cut_as_forward_cuts(
    encoder_dir: Path, tmp_path: Path
) -> None:
    """Form "packed": pairs packed before the graph, one batch of very different lengths, and
    pairs whose packed length passes the model's max_length (64, the tiny BERT's positions):
    the right text's end cut as `forward` cuts it (its last [SEP], or all of it, too)."""
    long_text = " ".join(WORDS * 4)
    pairs = [
        ("ice", "water"),
        (long_text, long_text),
        (long_text, "ice"),
        ("ice", long_text),
        ("how are glacier caves formed ?", "a glacier cave is a cave formed in the ice"),
    ]
    for pooling, max_length in (("cls", 40), ("segments", 40), ("segments", 256)):
        inputs = {
            "kind": "transformer",
            "source": str(encoder_dir),
            "trainable": True,
            "max_length": max_length,
        }
        matcher = Matcher.untrained(
            "cross_encoder", inputs=inputs, task=RankingTask(), overrides={"pooling": pooling}
        )
        path = export_onnx(matcher, tmp_path / f"{pooling}-{max_length}")
        manifest = json.loads((path / "onnx.json").read_text())
        assert manifest["form"] == "packed" and manifest["graphs"] == {"packed": "packed.onnx"}
        assert manifest["max_length"] == matcher.model.max_length == 64
        data = matcher.encode([Example(left=a, right=b, label=0) for a, b in pairs])
        lengths = data.text_lengths
        packed = lengths[data.left] + lengths[data.right] - 1
        assert packed.max() > 64 and packed.min() < 8  # cut pairs beside short ones
        loaded = Matcher.load(path, batch_size=len(pairs))  # one batch, as torch's
        got, want = loaded.outputs(pairs), matcher.outputs(pairs)
        np.testing.assert_allclose(got, want, rtol=0, atol=EXACT_ATOL)
        assert not np.allclose(want, want[0])


def test_an_export_of_the_earlier_pairs_form_still_loads(
    cross: Matcher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cross-encoder exports written before the packed form hold one pairs graph that packs
    inside the graph: they load and score as before."""
    from attnmatch.export import graphs
    from attnmatch.models.pretrained import CrossEncoder

    with monkeypatch.context() as patch:
        patch.setitem(graphs.FORMS, CrossEncoder, graphs.INNER_FORMS[CrossEncoder])
        path = export_onnx(cross, tmp_path / "pairs-form")
    manifest = json.loads((path / "onnx.json").read_text())
    assert manifest["form"] == "pairs" and "max_length" not in manifest
    got, want = Matcher.load(path).outputs(PAIRS), cross.outputs(PAIRS)
    np.testing.assert_allclose(got, want, rtol=0, atol=EXACT_ATOL)


def test_a_packed_export_without_its_max_length_is_refused(
    exported: dict[str, Path], tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(exported["cross"], tmp_path / "copy"))
    manifest = json.loads((copy / "onnx.json").read_text())
    assert manifest["form"] == "packed"
    del manifest["max_length"], manifest["files"]
    (copy / "onnx.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"onnx\.json: field 'max_length'"):
        Matcher.load(copy)
