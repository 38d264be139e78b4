"""Arrays in: numpy as it is, torch CPU tensors as the numpy views of their memory, anything with
``__array__`` or DLPack through numpy.  The compiled core then reads the memory in place when its
dtype and layout already match the network (C-contiguous float32 for an f32 network, float64 for
f64), and makes one converted copy otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_array(x: Any, name: str = "x") -> Any:
    """x as a numpy array without copying where it can be shared (see the module docstring)."""
    if isinstance(x, np.ndarray):
        return x
    module = type(x).__module__ or ""
    if module.startswith("torch"):
        t = x.detach()
        if t.device.type != "cpu":
            from . import _core

            raise _core.ShapeError(f"{name}: a torch tensor on {t.device}; nnlens reads CPU memory (call .cpu() first)")
        try:
            return t.numpy()  # shares the tensor's memory
        except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16): one converted copy
            return t.double().numpy()
    if hasattr(x, "__array__") or isinstance(x, (list, tuple, int, float)):
        return np.asarray(x)
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return x  # the core names what it got


def baselines_like(b: Any, inputs: np.ndarray, dtype: Any) -> np.ndarray:
    """Captum's baselines: None (zeros), a scalar, or an array broadcastable to the inputs."""
    if b is None:
        return np.zeros(inputs.shape, dtype=dtype)
    b = as_array(b, "baselines")
    if np.ndim(b) == 0:
        return np.full(inputs.shape, b, dtype=dtype)
    try:
        out = np.broadcast_to(np.asarray(b, dtype=dtype), inputs.shape)
    except ValueError:
        from . import _core

        raise _core.ShapeError(
            f"baselines: shape {np.shape(b)} does not broadcast to the inputs' shape {inputs.shape}") from None
    return np.ascontiguousarray(out)
