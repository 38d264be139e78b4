"""NeuSemSlice: masks per unit, the same seed the same slice, the masked network."""

from __future__ import annotations

import numpy as np
import pytest

import nnlens


def test_semslice(cnn, rng) -> None:
    _, net = cnn
    X = rng.random((200, 1, 14, 14), dtype=np.float32)
    y = net(X).argmax(1)
    cats = sorted(set(y.tolist()))
    s = nnlens.semslice(net, X, y, samples=40, seed=3, categories=cats, theta=0.9)
    masks = s.masks
    assert [u["name"] for u in masks] == [u["name"] for u in s.units]
    assert masks[-1]["output"] and masks[-1]["keep"].all()  # the output unit keeps every neuron
    assert all(u["keep"].dtype == np.bool_ for u in masks)
    again = nnlens.semslice(net, X, y, samples=40, seed=3, categories=cats, theta=0.9)
    assert all((a["keep"] == b["keep"]).all() for a, b in zip(masks, again.masks))
    acc = s.parameters
    assert acc["kept"] + acc["removed"] == acc["total"] == net.parameters
    masked = s.network()
    assert masked(X[:4]).shape == (4, 5)
    with pytest.raises(nnlens.DataError, match="category"):
        nnlens.semslice(net, X[:5], np.zeros(5, np.int64), samples=10)  # classes 1-4 have no samples
    with pytest.raises(nnlens.InvalidValueError, match="theta"):
        nnlens.semslice(net, X, y, theta=1.5, categories=cats)
