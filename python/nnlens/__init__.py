"""nnlens: analyses of trained piecewise-linear networks, from Python.

A thin layer over the C++ library's run-time network form (nothing is computed again here)::

    import nnlens, numpy as np
    net = nnlens.load("lenet5.onnx")                   # .onnx, .nnet, .nnlw; a path or bytes
    y = net(np.zeros((8, 1, 28, 28), np.float32))      # forward, batch-first, the model's layout
    line = nnlens.exact_line(net, x0, x1)              # ExactLine: exact pieces of a segment
    attr, delta = nnlens.integrated_gradients(net, x, 0.0, target=3)   # exact IG, delta ~ 0
    prof = nnlens.profile(net, train_x); s = nnlens.slice(net, prof, x)  # NNSlicer
    cov = nnlens.coverage(net, train_x, train_y, test_x)                 # DeepImportance + DeepGauge
    twin = nnlens.compress(net, "int8", calibration=train_x)             # DFlare's twins ...
    res = nnlens.difftest(net, twin, seeds, seed=1)                      # ... and its search

Arrays: numpy in and out; torch CPU tensors and anything with ``__array__`` or DLPack are taken
too.  The core reads an array in place when its dtype and layout already match the network
(float32 C-contiguous for precision "f32", float64 for "f64"), else it makes one copy.
Errors: ``nnlens.Error`` (and its kinds: ShapeError, InvalidValueError, FormatError, DataError,
UnsupportedError, LimitError) carry the library's message.  Long calls release the GIL and stop on
Ctrl-C.  Every randomised call takes a ``seed``.  docs/python.md has an example per technique.
"""

from __future__ import annotations

import io as _io
import os as _os
from typing import Any, Optional, Union

from . import _core
from ._arrays import as_array as _as_array
from ._core import (  # noqa: F401  (re-exported)
    Coverage,
    DataError,
    Error,
    FormatError,
    InvalidValueError,
    LimitError,
    Network,
    Profile,
    SemanticSlice,
    ShapeError,
    Slice,
    UnsupportedError,
    kmeans_1d,
    load_profile,
    set_threads,
    silhouette_1d,
    supported_formats,
    worker_threads,
)
from .analyses import coverage, prepare_coverage, profile, semslice, slice  # noqa: F401
from .difftest import DiffTestResult, SeedResult, compress, difftest  # noqa: F401
from .exactline import (  # noqa: F401
    IGResult,
    Line,
    Plane,
    exact_ig,
    exact_line,
    exact_lines,
    exact_plane,
    integrated_gradients,
)

__version__: str = _core.__version__

__all__ = [
    "Coverage", "DataError", "DiffTestResult", "Error", "FormatError", "IGResult", "InvalidValueError", "LimitError",
    "Line", "Network", "Plane", "Profile", "SeedResult", "SemanticSlice", "ShapeError", "Slice", "UnsupportedError",
    "compress", "coverage", "difftest", "exact_ig", "exact_line", "exact_lines", "exact_plane", "from_torch",
    "integrated_gradients", "kmeans_1d", "load", "load_profile", "prepare_coverage", "profile", "semslice",
    "set_threads", "silhouette_1d", "slice", "supported_formats", "worker_threads", "__version__",
]


def load(source: Union[str, "_os.PathLike[str]", bytes, bytearray, memoryview], precision: str = "f32",
         layout: Optional[str] = None, format: Optional[str] = None) -> Network:
    """Reads a model: .onnx, .nnet or .nnlw (the demo's LeNet-5 weights), from a path or from bytes.

    precision: "f32" (float weights, the default) or "f64" (everything in double; an ONNX file's
    float weights are converted exactly).  layout: the layout of the arrays you pass (None: what
    the file declares; "nchw" / "nhwc" for an image model).  format: "onnx" / "nnet" / "nnlw" for
    bytes whose format is not detected (ONNX unless they start with NNLW or read as .nnet text).
    Raises nnlens.FormatError for a file that is not a model (naming the file and the node).
    """
    return _core.load(source, precision, layout, format)


def from_torch(module: Any, example_input: Any, precision: str = "f32", opset: int = 13) -> Network:
    """A torch.nn.Module as an nnlens Network: exported with torch.onnx.export into memory (the
    module in eval mode, batch axis dynamic), then read as load(bytes) reads it.  torch is
    imported only here."""
    import torch  # noqa: WPS433 (only when asked)

    if not isinstance(example_input, torch.Tensor):
        example_input = torch.as_tensor(_as_array(example_input, "example_input"), dtype=torch.float32)
    buf = _io.BytesIO()
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            torch.onnx.export(module, example_input, buf, input_names=["input"], output_names=["output"],
                              dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=opset)
    finally:
        module.train(was_training)
    net = _core.load(buf.getvalue(), precision, None, "onnx")
    return net


# Network(x) and Network.forward(x) take torch tensors and array-likes too (through numpy).
_forward = _core.Network.forward


def _call(self: Network, x: Any, threads: Optional[int] = None) -> Any:
    """Forward pass: x is a batch [N, *input_shape] in the model's layout (or flat rows [N, size]);
    returns the outputs [N, *output_shape] as a numpy array.  threads=1: on the calling thread."""
    return _forward(self, _as_array(x), threads)


_core.Network.__call__ = _call
_core.Network.forward = _call
