"""ExactLine from Python: exact pieces of segments and planes, exact integrated gradients, and the
Riemann / Gauss-Legendre sums they replace (docs/exactline.md, docs/exactline-ig.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _core
from ._arrays import as_array, baselines_like


class ClassInterval(NamedTuple):
    """[start, end] of t on which class `label` wins (argmax, or argmin for ACAS Xu)."""

    start: float
    end: float
    label: int


@dataclass
class Line:
    """The exact restriction of a network to the segment a -> b.

    t: the breaks 0 = t_0 < ... < t_k = 1 (float64); on [t_j, t_j+1] the network is affine in t.
    outputs: (k + 1, outputs) the network's outputs at every t_j.  classes: the intervals of t on
    which each class wins.  stats: the engine's counts (and, with validate=True, the check of
    every piece).  error: why the segment failed (exact_lines(errors="keep")), else None."""

    t: np.ndarray
    outputs: np.ndarray
    classes: List[ClassInterval]
    pieces: int
    stats: Dict[str, Any]
    error: Optional[str] = None
    precision: str = "f32"

    def eval(self, t: Union[float, np.ndarray]) -> np.ndarray:
        """The outputs at t in [0, 1] (interpolation inside the piece: exact up to rounding)."""
        if self.pieces == 0:
            raise _core.InvalidValueError("Line.eval: the segment has no pieces" + (f" ({self.error})" if self.error else ""))
        ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
        j = np.clip(np.searchsorted(self.t, ts, side="right") - 1, 0, self.pieces - 1)
        a = ((ts - self.t[j]) / (self.t[j + 1] - self.t[j]))[:, None]
        y = self.outputs[j] + a * (self.outputs[j + 1] - self.outputs[j])
        return y[0] if np.ndim(t) == 0 else y

    def __repr__(self) -> str:
        if self.error:
            return f"<nnlens.Line error: {self.error}>"
        labels = " ".join(str(c.label) for c in self.classes)
        return f"<nnlens.Line {self.pieces} pieces, classes {labels}>"


def _line(d: Dict[str, Any]) -> Line:
    stats = dict(d["stats"])
    stats["validate_tol"] = d["validate_tol"]
    return Line(t=d["t"], outputs=d["outputs"], classes=[ClassInterval(*c) for c in d["classes"]], pieces=d["pieces"],
                stats=stats, error=d["error"], precision=d["precision"])


def _args(validate: bool, validate_tol: Optional[float], merge_tol: float, max_pieces: int, max_memory: Optional[int],
          classes: str, threads: Optional[int], progress: bool, keep_going: bool = False) -> Any:
    a = _core._LineArgs()
    a.validate, a.validate_tol, a.merge_tol, a.max_pieces = validate, validate_tol, merge_tol, max_pieces
    a.max_memory, a.classes, a.threads, a.progress, a.keep_going = max_memory, classes, threads, progress, keep_going
    return a


def exact_line(net: _core.Network, a: Any, b: Any, validate: bool = False, *, validate_tol: Optional[float] = None,
               merge_tol: float = 0.0, max_pieces: int = 1 << 24, max_memory: Optional[int] = None,
               classes: str = "argmax", threads: Optional[int] = None, progress: bool = False) -> Line:
    """ExactLine on the segment a -> b (two samples: the input shape without the batch axis).

    Computed in the network's precision (load(..., precision="f64") for double).  validate: check
    every piece at 1/4, 1/2, 3/4 against the network (tolerance validate_tol, default 1e-3 in f32,
    1e-9 in f64; stats["violations"]).  merge_tol: merge breaks closer than this in t.  max_memory:
    bytes of values in flight (None: 1 GiB; 0: unbounded); a layer that would pass it runs on
    sub-segments, with the same pieces.  classes: "argmax" or "argmin".  threads=1: on this thread.
    Raises nnlens.Error for a wrong shape, NaN, a == b, more than max_pieces pieces, or a layer
    that is not piecewise-linear."""
    d = _core.exact_line(net, as_array(a, "a"), as_array(b, "b"),
                         _args(validate, validate_tol, merge_tol, max_pieces, max_memory, classes, threads, progress))
    return _line(d)


def exact_lines(net: _core.Network, starts: Any, ends: Any, validate: bool = False, *, errors: str = "raise",
                validate_tol: Optional[float] = None, merge_tol: float = 0.0, max_pieces: int = 1 << 24,
                max_memory: Optional[int] = None, classes: str = "argmax", threads: Optional[int] = None,
                progress: bool = False) -> List[Line]:
    """ExactLine on many segments starts[i] -> ends[i] (batches [N, ...]), in parallel.

    errors="raise": the first failing segment raises (naming it); "keep": each failure is kept in
    its Line's `error` and the others still run.  Other options as exact_line."""
    if errors not in ("raise", "keep"):
        raise _core.InvalidValueError(f"errors: expected 'raise' or 'keep', got {errors!r}")
    ds = _core.exact_lines(net, as_array(starts, "starts"), as_array(ends, "ends"),
                           _args(validate, validate_tol, merge_tol, max_pieces, max_memory, classes, threads, progress,
                                 errors == "keep"))
    return [_line(d) for d in ds]


@dataclass
class Polygon:
    """A convex polygon of the (u, v) plane, counter-clockwise, and the outputs at its vertices
    (the network is affine inside: barycentric interpolation of them)."""

    vertices: np.ndarray
    outputs: np.ndarray
    label: Optional[int] = None


@dataclass
class Plane:
    """The exact restriction of a network to a polygon of the plane origin + u U + v V: polygons
    tiling it on each of which the network is affine, and the regions where each class wins."""

    polygons: List[Polygon]
    regions: List[Polygon]
    area: float

    def __repr__(self) -> str:
        return f"<nnlens.Plane {len(self.polygons)} polygons, {len(self.regions)} class regions, area {self.area:g}>"


def exact_plane(net: _core.Network, origin: Any, u: Any, v: Any,
                polygon: Sequence[Tuple[float, float]] = ((0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)), *,
                max_polygons: int = 1 << 22, classes: str = "argmax") -> Plane:
    """ExactLine on a convex polygon of a 2-D plane of input space (SyReNN's plane transformer):
    points origin + a u + b v for (a, b) inside `polygon` (counter-clockwise, >= 3 vertices)."""
    d = _core.exact_plane(net, as_array(origin, "origin"), as_array(u, "u"), as_array(v, "v"),
                          [tuple(map(float, p)) for p in polygon], max_polygons, classes)
    polys = [Polygon(p["vertices"], p["outputs"]) for p in d["polygons"]]
    regs = [Polygon(r["vertices"], r["outputs"], r["label"]) for r in d["regions"]]
    return Plane(polys, regs, d["area"])


@dataclass
class IGResult:
    """Exact integrated gradients of output `target` along baseline -> x (one input).

    attributions: the exact IG (the input's shape).  delta: F(x) - F(baseline); sum: the
    attributions' sum (equal to delta up to rounding).  riemann: {(rule, n_steps): attributions}
    of the sums asked, from the exact pieces' gradients (what each rule would give)."""

    attributions: np.ndarray
    delta: float
    sum: float
    target: int
    pieces: int
    riemann: Dict[Tuple[str, int], np.ndarray] = field(default_factory=dict)


def exact_ig(net: _core.Network, x: Any, baseline: Any = None, target: Optional[int] = None, *,
             sums: Sequence[Tuple[str, int]] = (), max_memory: Optional[int] = None, threads: Optional[int] = None,
             progress: bool = False) -> IGResult:
    """Exact IG of one input x (the input shape without the batch axis), streamed: the line is
    never kept (exact_ig_stream), so memory stays within max_memory (bytes; None: 1 GiB) whatever
    the number of pieces.  baseline: None (zeros), a scalar or an array of x's shape.  target:
    the output (None: the predicted class).  sums: e.g. [("left", 32), ("gausslegendre", 50)],
    accumulated from the pieces beside the exact IG (rules: left, right, middle, trapezoid,
    gausslegendre)."""
    xa = np.asarray(as_array(x, "x"))
    dtype = np.float64 if net.precision == "f64" else np.float32
    b = baselines_like(baseline, xa, dtype)
    d = _core.exact_ig(net, xa, b, target, [(str(r), int(m)) for r, m in sums], max_memory, threads, progress)
    return IGResult(d["attributions"], d["delta"], d["sum"], d["target"], d["pieces"],
                    {(k[0], int(k[1])): v for k, v in d["riemann"].items()})


def integrated_gradients(net: _core.Network, inputs: Any, baselines: Any = None,
                         target: Union[None, int, Sequence[int], np.ndarray] = None, *, method: str = "exact",
                         n_steps: int = 50, max_memory: Optional[int] = None, threads: Optional[int] = None,
                         progress: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Integrated gradients in Captum's calling convention: returns (attributions, delta).

    inputs: a batch [N, ...] in the model's layout; baselines: None (zeros, Captum's default), a
    scalar, or an array broadcastable to the inputs; target: one output index, one per input, or
    None (each input's predicted class).  method: "exact" (ExactLine's pieces: no steps, delta ~
    rounding) or Captum's approximations with n_steps -- "riemann_left", "riemann_right",
    "riemann_middle", "riemann_trapezoid", "gausslegendre" -- from the network's own gradients at
    the samples.  delta per input = sum(attributions) - (F(x) - F(baseline)) (Captum's
    convergence delta)."""
    xa = np.asarray(as_array(inputs, "inputs"))
    dtype = np.float64 if net.precision == "f64" else np.float32
    b = baselines_like(baselines, xa, dtype)
    if target is not None and not isinstance(target, (int, np.integer)):
        target = np.asarray(as_array(target, "target"))
    elif isinstance(target, np.integer):
        target = int(target)
    return _core.integrated_gradients(net, xa, b, target, method, n_steps, max_memory, threads, progress)
