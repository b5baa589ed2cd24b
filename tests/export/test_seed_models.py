"""ONNX export of the seed models (aMV-LSTM / MV-LSTM, HCRN, DAMM, MP-CNN, IARNN and their
variants): each exports through the building blocks' export paths (`attnmatch.nn.exporting`),
loads with `Matcher.load` on ONNX Runtime and gives torch's outputs within `EXACT_ATOL` on
pairs of other lengths and batch sizes than the traced example (texts of one token, a batch of
very unequal lengths), on a tiny random vocabulary fitted to the pairs' texts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from attnmatch import Matcher
from attnmatch.export import EXACT_ATOL, export_onnx
from attnmatch.export.runtime import OnnxModel
from attnmatch.models import model_type_of
from attnmatch.nn.exporting import export_paths, exporting, window_padding
from attnmatch.nn.masking import masked_kmax
from attnmatch.nn.overlap import WithOverlapFeatures, idf_table
from attnmatch.tasks import ClassificationTask, RankingTask, Task
from tests.models.conftest import TINY

WORDS = "ice water glacier cave formed war end year man plays guitar dog runs city paris".split()
LONG = " ".join(WORDS * 3)  # 45 tokens
PAIRS = [
    ("ice", "water"),  # one token each
    ("ice", LONG),  # very unequal lengths in one pair
    (LONG, "dog"),
    ("how are glacier caves formed", "a glacier cave is a cave formed in the ice"),
    ("what year did the war end", "it ended in 1945"),
    ("man plays guitar", "a dog runs"),
    ("paris", "paris is the city"),
    ("", "water"),  # an empty text
    ("unseen words only", "zzz qqq"),  # unknown tokens
]
# The five headline systems (their default presets), then the variants their papers study.
HEADLINE = ["amvlstm_q", "hcrn", "damm", "mpcnn_attention", "iarnn_gate"]
VARIANTS: dict[str, dict[str, Any]] = {
    "mvlstm": {},
    "amvlstm_a": {},
    "amvlstm_qa": {},
    "amvlstm_q_len": {},
    "mvlstm-tensor-unshared": {"interaction": "tensor", "shared_encoder": False},
    "mvlstm-separate-bilinear": {"interaction": "bilinear", "directions": "separate"},
    "hcrn_bilinear": {},
    "hcrn_complex": {},
    "hcrn_real": {},
    "hcrn_diagonal": {},
    "hcrn-extractive": {"pooling": "extractive"},
    "damm_no_cross": {},
    "damm_3block": {},
    "damm-sinusoidal": {"positional": "sinusoidal"},
    "mpcnn": {},
    "mpcnn-reference-pooling": {"attention": True, "fast_pooling": False},
    "gru": {},
    "oarnn": {},
    "oarnn_uni": {},
    "iarnn_word": {},
    "iarnn_occam_context": {},
    "iarnn_context": {},
}


def _matcher(name: str, task: Task | None = None, **overrides: Any) -> Matcher:
    """`name` (a preset, or "preset-what" for the preset with `overrides`) on random word
    vectors over the pairs' vocabulary, tiny, random weights."""
    preset = name.split("-")[0]
    texts = [t for pair in PAIRS for t in pair][:-2]  # the last pair's words stay unknown
    return Matcher.untrained(
        preset,
        inputs={"kind": "word_vectors", "vectors": "random", "dim": 8},
        task=task or RankingTask(),
        overrides=TINY[model_type_of(preset)] | overrides,
        train_texts=texts,
        seed=1,
    )


def _assert_onnx_equals_torch(matcher: Matcher, folder: Path) -> Matcher:
    exported = Matcher.load(export_onnx(matcher, folder))  # auto: ONNX Runtime
    assert exported.backend == "onnx" and isinstance(exported.model, OnnxModel)
    for batch_size in (1, 3, 64):  # the last: every pair in one batch, long beside short
        exported.batch_size = matcher.batch_size = batch_size
        got, want = exported.outputs(PAIRS), matcher.outputs(PAIRS)
        assert got.shape == want.shape == (len(PAIRS), matcher.num_outputs)
        np.testing.assert_allclose(got, want, rtol=0, atol=EXACT_ATOL)
    assert not np.allclose(want, want[0])  # the pairs score differently: a real check
    return exported


@pytest.mark.parametrize("name", HEADLINE)
def test_a_headline_seed_model_exports_and_equals_torch(name: str, tmp_path: Path) -> None:
    _assert_onnx_equals_torch(_matcher(name), tmp_path / "onnx")


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_seed_variant_exports_and_equals_torch(name: str, tmp_path: Path) -> None:
    _assert_onnx_equals_torch(_matcher(name, **VARIANTS[name]), tmp_path / "onnx")


@pytest.mark.parametrize("name", ["hcrn", "mpcnn_attention", "damm"])
def test_a_classifier_exports_with_every_output(name: str, tmp_path: Path) -> None:
    matcher = _matcher(name, ClassificationTask(num_classes=3))
    assert matcher.num_outputs == 3
    _assert_onnx_equals_torch(matcher, tmp_path / "onnx")


def test_a_saved_seed_model_with_exact_match_features_exports(tmp_path: Path) -> None:
    """`WithOverlapFeatures` around aMV-LSTM: the features and the model in one pairs graph."""
    matcher = _matcher("amvlstm_q")
    assert matcher.inputs is not None
    idf = idf_table(matcher.inputs.encode([text for pair in PAIRS for text in pair]))
    matcher.model = WithOverlapFeatures(matcher.model, 1, idf)
    with torch.no_grad():
        matcher.model.head.weight.normal_()
    matcher = Matcher.load(matcher.save(tmp_path / "model"))
    _assert_onnx_equals_torch(matcher, tmp_path / "onnx")


def test_the_export_paths_are_on_only_inside_export_paths() -> None:
    """Outside `export_paths` the building blocks keep their usual (value-deciding) paths, so
    `forward` is unchanged; inside, the padding no longer depends on the batch's widths."""
    assert not exporting()
    x = torch.ones(2, 3, 5)  # (B, D, T)
    assert window_padding(x, 3).shape[-1] == 5 and window_padding(x[..., :1], 3).shape[-1] == 3
    values, mask = torch.arange(6.0).view(2, 3), torch.tensor([[1, 1, 0], [1, 0, 0]]).bool()
    with export_paths():
        assert exporting()
        assert window_padding(x, 3).shape[-1] == 7 and window_padding(x[..., :1], 3).shape[-1] == 3
        inside = masked_kmax(values, mask, 4)
    assert not exporting()
    torch.testing.assert_close(inside, masked_kmax(values, mask, 4), rtol=0, atol=0)
    torch.testing.assert_close(inside, torch.tensor([[1.0, 0, 0, 0], [3, 0, 0, 0]]))


def test_the_pairs_graph_runs_batches_of_at_most_pair_batch_pairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the matcher's batch size, the pairs graph gets at most `PAIR_BATCH` pairs a
    run (smaller length-sorted batches pad less), and the outputs stay torch's."""
    from attnmatch.runtime import graphs as runtime
    from attnmatch.runtime.graphs import OnnxGraphs

    matcher = _matcher("hcrn")
    exported = Matcher.load(export_onnx(matcher, tmp_path / "onnx"), batch_size=512)
    sizes: list[int] = []
    run = OnnxGraphs.pairs

    def counted(self: OnnxGraphs, *arrays: np.ndarray) -> np.ndarray:
        sizes.append(len(arrays[0]))
        return run(self, *arrays)

    monkeypatch.setattr(OnnxGraphs, "pairs", counted)
    pairs = PAIRS * 9  # 72 pairs
    got = exported.outputs(pairs)
    assert max(sizes) == runtime.PAIR_BATCH and sum(sizes) == len(pairs)
    np.testing.assert_allclose(got, matcher.outputs(pairs), rtol=0, atol=EXACT_ATOL)


@pytest.mark.parametrize("name", ["amvlstm_q", "mpcnn_attention"])
def test_a_seed_model_on_a_static_sub_word_table_exports(name: str, tmp_path: Path) -> None:
    """Static vectors (`wordpiece`, and `static`, whose encoder is the same table): an
    embedding table read by ids, as GloVe is; the export is the seed model's."""
    pytest.importorskip("transformers")
    from tests.tiny_transformer import write_tiny_encoder

    source = write_tiny_encoder(tmp_path / "encoder")
    matcher = Matcher.untrained(
        name,
        inputs={"kind": "wordpiece", "source": str(source)},
        task=RankingTask(),
        overrides=TINY[model_type_of(name)],
        seed=1,
    )
    assert matcher.inputs is not None and matcher.inputs.kind == "wordpiece"
    _assert_onnx_equals_torch(matcher, tmp_path / "onnx")


@pytest.mark.parametrize("name", ["amvlstm_q", "damm"])
def test_a_seed_model_on_frozen_transformer_inputs_exports(name: str, tmp_path: Path) -> None:
    """The token encoder a tiny random BERT (as MiniLM inputs): its states as the bi-encoder's
    text graph computes them (`traceable_states`), then the seed model's export paths."""
    pytest.importorskip("transformers")
    from tests.models.conftest import tiny_inputs, tiny_model, tiny_transformer_encoder

    model = tiny_model(name, encoder=tiny_transformer_encoder())
    matcher = Matcher(
        model=model.eval(),
        model_type=model_type_of(name),
        inputs=tiny_inputs(model),
        task=RankingTask(),
    )
    _assert_onnx_equals_torch(matcher, tmp_path / "onnx")
