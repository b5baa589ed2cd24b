"""BiRNN against PyTorch's own nn.LSTM / nn.GRU run on each sequence alone, unpadded."""

from __future__ import annotations

import copy
from unittest import mock

import pytest
import torch
from torch.func import functional_call

import attnmatch.nn.recurrent as recurrent
from attnmatch.nn.recurrent import _SMALL_INFERENCE_BATCH, BiRNN


def random_batch(
    lengths: list[int],
    embed: int,
    *,
    extra_pad: int = 0,
    dtype: torch.dtype = torch.float32,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded inputs with random (not zero) padding, so leaks would show."""
    g = torch.Generator().manual_seed(seed)
    steps = max(lengths, default=0) + extra_pad
    x = torch.randn(len(lengths), steps, embed, generator=g, dtype=dtype)  # (B, T, E)
    mask = torch.arange(steps).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)  # (B, T)
    return x, mask


def reference(birnn: BiRNN, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The same weights through nn.LSTM / nn.GRU, one unpadded sequence at a time."""
    out = x.new_zeros(*x.shape[:2], 2 * birnn.hidden_size)  # (B, T, 2H)
    for b, length in enumerate(mask.sum(dim=1).tolist()):
        if length:
            out[b, :length] = birnn.rnn(x[b : b + 1, :length])[0][0]  # (L, 2H)
    return out


def lengths_for(batch: int, steps: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, steps + 1, (batch,), generator=g).tolist()
    lengths[0], lengths[-1] = steps, 1  # the longest, and a length-1 sequence
    return lengths


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize(("batch", "embed", "hidden"), [(6, 7, 5), (40, 50, 50)])
@pytest.mark.parametrize("grad", [True, False])
def test_forward_matches_per_sequence_reference(
    cell: str, batch: int, embed: int, hidden: int, grad: bool
) -> None:
    torch.manual_seed(0)
    birnn = BiRNN(cell, embed, hidden)  # type: ignore[arg-type]
    x, mask = random_batch(lengths_for(batch, 12, seed=batch), embed, extra_pad=3)
    with torch.set_grad_enabled(grad):
        out = birnn(x, mask)
    with torch.no_grad():
        expected = reference(birnn, x, mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert (out[~mask] == 0).all()


@pytest.mark.parametrize("group_max", [5, 256])
def test_inference_by_length_in_chunks_matches_the_reference(
    group_max: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From `_GROUPED_INFERENCE_BATCH` sequences up, inference groups them by length; a group
    larger than `_DENSE_GROUP_MAX` runs in chunks. Same states either way."""
    monkeypatch.setattr(recurrent, "_DENSE_GROUP_MAX", group_max)
    torch.manual_seed(0)
    birnn = BiRNN("lstm", 6, 5)
    lengths = [7] * 31 + [3] * 23 + lengths_for(16, 9, seed=2)  # 70 sequences, two big groups
    x, mask = random_batch(lengths, 6, extra_pad=2)
    with torch.inference_mode():
        out = birnn(x, mask)
        expected = reference(birnn, x, mask)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    assert (out[~mask] == 0).all()


def test_the_fast_lstm_path_is_taken_for_training_and_large_inference_batches() -> None:
    birnn = BiRNN("lstm", 4, 3)
    x, mask = random_batch([3, 1, 2], 4)
    assert type(birnn(x, mask).grad_fn).__name__ == "_PackedBiLSTMBackward"
    # In inference, small batches go to nn.LSTM (faster there), large ones to _PackedBiLSTM.
    with mock.patch.object(birnn, "_forward_lstm_cpu", wraps=birnn._forward_lstm_cpu) as fast:
        with torch.inference_mode():
            birnn(*random_batch([2] * (_SMALL_INFERENCE_BATCH - 1), 4))
            assert fast.call_count == 0
            birnn(*random_batch([2] * _SMALL_INFERENCE_BATCH, 4))
            assert fast.call_count == 1


def test_gradients_match_per_sequence_reference() -> None:
    torch.manual_seed(0)
    birnn = BiRNN("lstm", 7, 5)
    ref = copy.deepcopy(birnn)
    x, mask = random_batch(lengths_for(9, 10, seed=1), 7, extra_pad=2)
    upstream = torch.randn(*x.shape[:2], 10)  # (B, T, 2H)

    x1 = x.clone().requires_grad_()
    (birnn(x1, mask) * upstream).sum().backward()
    x2 = x.clone().requires_grad_()
    (reference(ref, x2, mask) * upstream).sum().backward()

    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-4, rtol=1e-4)
    assert (x1.grad[~mask] == 0).all()
    for (name, p1), p2 in zip(birnn.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p1.grad, p2.grad, atol=1e-4, rtol=1e-4, msg=name)


def test_gradcheck_float64() -> None:
    torch.manual_seed(0)
    birnn = BiRNN("lstm", 3, 2).double()
    x, mask = random_batch([4, 1, 0, 2], 3, extra_pad=1, dtype=torch.float64)
    names = [name for name, _ in birnn.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in birnn.parameters()]

    def run(x: torch.Tensor, *weights: torch.Tensor) -> torch.Tensor:
        return functional_call(birnn, dict(zip(names, weights, strict=True)), (x, mask))

    assert torch.autograd.gradcheck(run, (x.requires_grad_(), *params))


@pytest.mark.parametrize("grad", [True, False])
def test_padding_invariance(grad: bool) -> None:
    torch.manual_seed(0)
    birnn = BiRNN("lstm", 6, 4)
    lengths = [5, *lengths_for(_SMALL_INFERENCE_BATCH + 5, 9, seed=2)]
    x, mask = random_batch(lengths, 6, extra_pad=4)
    with torch.set_grad_enabled(grad):
        batched = birnn(x, mask)
        alone = birnn(x[:1, :5], mask[:1, :5])
    torch.testing.assert_close(alone[0], batched[0, :5], atol=1e-6, rtol=1e-6)
    assert (batched[0, 5:] == 0).all()


def test_zero_length_sequences_give_zeros() -> None:
    torch.manual_seed(0)
    birnn = BiRNN("lstm", 4, 3)
    for lengths in ([3, 0, 2, 0], [0, 0]):
        x, mask = random_batch(lengths, 4, extra_pad=2)
        x.requires_grad_()
        out = birnn(x, mask)
        assert out.shape == (len(lengths), x.shape[1], 6)
        assert (out[~mask] == 0).all() and torch.isfinite(out).all()
        out.sum().backward()
        assert torch.isfinite(x.grad).all() and (x.grad[~mask] == 0).all()
        assert all(torch.isfinite(p.grad).all() for p in birnn.parameters())
        birnn.zero_grad()


def test_parameters_are_the_nn_lstm_ones() -> None:
    """Checkpoints keep nn.LSTM's parameter names and shapes."""
    birnn = BiRNN("lstm", 7, 5)
    shapes = {name: tuple(p.shape) for name, p in birnn.named_parameters()}
    expected = {}
    for suffix in ("", "_reverse"):
        expected |= {
            f"rnn.weight_ih_l0{suffix}": (20, 7),
            f"rnn.weight_hh_l0{suffix}": (20, 5),
            f"rnn.bias_ih_l0{suffix}": (20,),
            f"rnn.bias_hh_l0{suffix}": (20,),
        }
    assert shapes == expected
