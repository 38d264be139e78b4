"""Models and arrays: load (path, bytes, torch), forward against PyTorch and against known logits,
layouts, precision, no copy where none is needed, errors."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch

import nnlens
from conftest import onnx_bytes, shared_dir, small_cnn


def test_version_and_repr(lenet5: nnlens.Network) -> None:
    assert nnlens.__version__.count(".") == 2
    assert lenet5.input_shape == (1, 28, 28) and lenet5.output_shape == (10,)
    assert lenet5.layout == "nchw" and lenet5.precision == "f32"
    assert lenet5.parameters == 107786
    types = [l["type"] for l in lenet5.layers]
    assert types[:3] == ["Conv2D", "ReLU", "MaxPool2D"] and types[-1] == "Dense"
    assert sum(l["params"] for l in lenet5.layers) == 107786
    r = repr(lenet5)
    assert "input [N,1,28,28] (nchw)" in r and "107786 parameters" in r


def test_lenet5_known_logits(lenet5: nnlens.Network) -> None:
    """DeepXplore's LeNet-5 on its own test images: the logits its Keras model gives (expected.csv)."""
    from PIL import Image

    d = shared_dir() / "models" / "deepxplore-mnist"
    rows = [l.split(",") for l in (d / "expected.csv").read_text().splitlines()[1:]]
    rows = [r for r in rows if r[1] == "lenet5"][:24]
    x = np.stack([np.asarray(Image.open(d / r[0]), np.float32)[None] / 255 for r in rows])
    want = np.array([[float(v) for v in r[3:]] for r in rows])
    y = lenet5(x)
    assert np.abs(y - want).max() < 1e-4
    assert (y.argmax(1) == [int(r[2]) for r in rows]).all()


def test_forward_matches_torch(cnn, rng) -> None:
    m, net = cnn
    x = rng.random((7, 1, 14, 14), dtype=np.float32)
    with torch.no_grad():
        want = m(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(net(x), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(net(torch.from_numpy(x)), want, rtol=1e-5, atol=1e-5)  # a torch tensor in
    np.testing.assert_allclose(net(x, threads=1), net(x), rtol=0, atol=0)
    assert net(x[:0]).shape == (0, 5)


def test_f64_matches_torch_double(cnn, rng) -> None:
    m, _ = cnn
    net = nnlens.from_torch(m, torch.zeros(1, 1, 14, 14), precision="f64")
    x = rng.random((3, 1, 14, 14))
    with torch.no_grad():
        want = m.double()(torch.from_numpy(x)).numpy()
    m.float()
    y = net(x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)  # float32 weights, exact in double
    assert net.to("f32").precision == "f32"


def test_load_path_bytes_torch_agree(tmp_path: Path, cnn, rng) -> None:
    m, net = cnn
    b = onnx_bytes(m, torch.zeros(1, 1, 14, 14))
    p = tmp_path / "cnn.onnx"
    p.write_bytes(b)
    x = rng.random((2, 1, 14, 14), dtype=np.float32)
    for other in (nnlens.load(p), nnlens.load(str(p)), nnlens.load(b), nnlens.load(bytearray(b)), nnlens.load(memoryview(b))):
        np.testing.assert_array_equal(other(x), net(x))


def test_nnet_from_path_and_bytes() -> None:
    p = shared_dir() / "models" / "acasxu-nnet" / "ACASXU_run2a_1_1_batch_2000.nnet"
    if not p.exists():
        pytest.skip("no ACAS Xu models")
    a, b = nnlens.load(p, precision="f64"), nnlens.load(p.read_bytes(), precision="f64")
    assert a.input_shape == (5,) and a.output_shape == (5,) and a.layout == "none"
    lo, hi = a.input_range
    x = np.stack([lo + (hi - lo) * t for t in (0.2, 0.5, 0.9)])
    np.testing.assert_array_equal(a(x), b(x))


def test_nhwc_model_from_torch(rng) -> None:
    """A model that reads NHWC (its first op transposes to NCHW) takes NHWC arrays, as torch does."""
    conv = small_cnn(3)

    class NHWC(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = conv

        def forward(self, x):  # noqa: ANN001, ANN201
            return self.inner(x.permute(0, 3, 1, 2))

    m = NHWC().eval()
    net = nnlens.from_torch(m, torch.zeros(1, 14, 14, 1))
    assert net.layout == "nhwc" and net.input_shape == (14, 14, 1) and net.network_input_shape == (1, 14, 14)
    x = rng.random((4, 14, 14, 1), dtype=np.float32)
    with torch.no_grad():
        np.testing.assert_allclose(net(x), m(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)


def test_layout_override(cnn, rng) -> None:
    m, _ = cnn
    b = onnx_bytes(m, torch.zeros(1, 1, 14, 14))
    net = nnlens.load(b, layout="nhwc")
    assert net.input_shape == (14, 14, 1) and net.layout == "nhwc"
    x = rng.random((2, 1, 14, 14), dtype=np.float32)
    np.testing.assert_allclose(net(x.transpose(0, 2, 3, 1)), nnlens.load(b)(x), rtol=0, atol=0)


def test_no_copy_where_none_is_needed(cnn, rng) -> None:
    _, net = cnn
    x = rng.random((3, 1, 14, 14), dtype=np.float32)
    ptr, n = nnlens._core._input_pointer(net, x)
    assert ptr == x.ctypes.data and n == 3  # read in place
    t = torch.from_numpy(x.copy())
    assert nnlens._core._input_pointer(net, nnlens._arrays.as_array(t))[0] == t.data_ptr()  # a torch tensor: in place
    assert nnlens._core._input_pointer(net, x.reshape(3, -1))[0] == x.ctypes.data  # flat rows: in place
    assert nnlens._core._input_pointer(net, x.astype(np.float64))[0] != x.ctypes.data  # another dtype: one copy
    f = np.asfortranarray(x)
    assert nnlens._core._input_pointer(net, f)[0] != f.ctypes.data  # not C-contiguous: one copy
    y = net(x)
    assert y.flags.c_contiguous and y.dtype == np.float32  # handed over without a copy (owned by a capsule)


def test_bad_input_raises(cnn, tmp_path: Path) -> None:
    _, net = cnn
    with pytest.raises(nnlens.ShapeError, match=r"expected \(N, 1, 14, 14\)"):
        net(np.zeros((2, 14, 14), np.float32))
    x = np.zeros((3, 1, 14, 14), np.float32)
    x[2, 0, 3, 4] = np.nan
    with pytest.raises(nnlens.InvalidValueError, match="sample 2") as e:
        net(x)
    assert isinstance(e.value, nnlens.Error)
    with pytest.raises(nnlens.InvalidValueError, match="array of numbers"):
        net(np.array([["a"]], dtype=object))
    bad = tmp_path / "not-a-model.onnx"
    bad.write_bytes(b"this is not a protobuf" * 10)
    with pytest.raises(nnlens.FormatError, match="not-a-model.onnx"):
        nnlens.load(bad)
    with pytest.raises(nnlens.FormatError, match="no such file"):
        nnlens.load(tmp_path / "missing.onnx")
    h5 = tmp_path / "x.h5"
    h5.write_bytes(b"HDF")
    with pytest.raises(nnlens.FormatError, match="unsupported model format"):
        nnlens.load(h5)
    with pytest.raises(nnlens.Error):
        nnlens.load(b"\x08\x07garbage")
    with pytest.raises(nnlens.InvalidValueError, match="precision"):
        nnlens.load(bad, precision="f16")
