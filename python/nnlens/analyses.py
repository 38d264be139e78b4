"""NNSlicer, DeepImportance (with the DeepGauge and surprise criteria) and NeuSemSlice from Python
(docs/nnslicer.md, docs/deepimportance.md, docs/neusemslice.md)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Union

from . import _core
from ._arrays import as_array

ALL_CRITERIA = ("idc", "nc", "kmnc", "nbc", "snac", "tknc", "lsc", "dsc")


def profile(net: _core.Network, X: Any, granularity: str = "channel", *, batch: int = 256,
            threads: Optional[int] = None, progress: bool = False) -> _core.Profile:
    """NNSlicer's profile of net over X [N, ...]: the mean activation of every neuron (a channel
    of a feature map, granularity="channel", or each element, "element").  Profile.save(path) and
    nnlens.load_profile(path) keep it; Profile.merge adds the profile of another dataset."""
    return _core.profile(net, as_array(X, "X"), granularity, batch, threads, progress)


def slice(net: _core.Network, profile: _core.Profile, samples: Any, theta: float = 0.3,
          target: Optional[int] = None, *, abs_sum: bool = False, denominator: str = "sum", cutoff: str = "max",
          threads: Optional[int] = None, progress: bool = False) -> _core.Slice:
    """NNSlicer's slice of the samples' classes (each sample's predicted class, or `target`).

    Returns a Slice: .contrib {tensor: int64 CONTRIB per neuron}, .masks {tensor: bool, neurons in
    the slice}, .synapse_contrib, .sizes, and .network(keep=1.0) the sliced (masked) network.
    theta: the filter threshold; denominator "sum" | "activation" and cutoff "max" | "first": the
    spec's alternative readings (docs/nnslicer.md)."""
    return _core.slice(net, profile, as_array(samples, "samples"), theta, target, abs_sum, denominator, cutoff, threads,
                       progress)


def prepare_coverage(net: _core.Network, train_x: Any, train_y: Any = None, criteria: Sequence[str] = ALL_CRITERIA, *,
                     layer: Union[None, int, str] = None, m: int = 6, nc_threshold: float = 0.75, kmnc_k: int = 1000,
                     tknc_k: int = 3, lsc_range: str = "spec", threads: Optional[int] = None) -> _core.Coverage:
    """Prepares the coverage criteria once on a training set (IDC needs its labels train_y: it
    uses the correctly classified inputs); Coverage.measure(test_x) then measures any test set.
    layer: IDC's and LSC/DSC's subject layer (None: the layer feeding the last weighted layer; an
    index, negative from the end, or "Type#k").  m: IDC's important neurons.  lsc_range: "spec"
    ([0, 2000]) or "reference" (the SA code's [min test LSA, 2000])."""
    return _core.prepare_coverage(net, as_array(train_x, "train_x"), None if train_y is None else as_array(train_y, "train_y"),
                                  list(criteria), layer, m, nc_threshold, kmnc_k, tknc_k, lsc_range, threads)


def coverage(net: _core.Network, train_x: Any, train_y: Any, test_x: Any, criteria: Sequence[str] = ALL_CRITERIA,
             **options: Any) -> Dict[str, Dict[str, Any]]:
    """The coverage of test_x: {criterion: {"coverage" (percent), "covered", "total", ...}} for
    each of idc, nc, kmnc, nbc, snac, tknc, lsc, dsc asked (a criterion that cannot be computed on
    this data holds {"error": message}).  Options as prepare_coverage."""
    c = prepare_coverage(net, train_x, train_y, criteria, **options)
    return c.measure(as_array(test_x, "test_x"))


def semslice(net: _core.Network, X: Any, y: Any, *, metric: str = "taylor", theta: float = 0.95,
             similarity: str = "cka", step: int = 0, samples: int = 500, seed: int = 0,
             categories: Optional[Sequence[int]] = None, metric_samples: int = 0,
             threads: Optional[int] = None) -> _core.SemanticSlice:
    """NeuSemSlice: the critical neurons of each class of (X, y), and their union as a mask.

    Returns a SemanticSlice: .masks (per Dense/Conv2D unit a bool per neuron), .units (per
    category k and sim), .parameters (kept / removed / compression), .network() the masked
    network, .save(path).  metric: avg, var, ens, taylor, deeplift; similarity: cka, uncentered,
    unbiased; samples per category for the Gram matrices, drawn with `seed`."""
    return _core.semslice(net, as_array(X, "X"), as_array(y, "y"), metric, theta, similarity, step, samples, seed,
                          None if categories is None else [int(c) for c in categories], metric_samples, threads)
