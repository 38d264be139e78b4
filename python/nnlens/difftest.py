"""DFlare from Python: compressed twins and the search for inputs on which a twin deviates from its
original (docs/dflare.md, docs/compress.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _core
from ._arrays import as_array

Model = Union[_core.Network, Callable[[np.ndarray], Any]]


def compress(net: _core.Network, method: str = "int8", *, calibration: Any = None, ratio: Optional[float] = None,
             per_tensor: bool = False) -> _core.Network:
    """A compressed twin of net.

    "int8": full int8 inference (per-channel int8 weights, activations calibrated on
    `calibration`); the twin runs forward and difftest (Network.is_int8).  "q8": DFlare's reference
    rule, weight-only int8 of the weight tensors with >= 1024 elements.  "prune" / "channel-prune":
    the fraction `ratio` of each layer's weights (by magnitude) or channels (by L1 norm) set to 0.
    per_tensor: one weight scale per tensor instead of per output channel."""
    return _core.compress(net, method, None if calibration is None else as_array(calibration, "calibration"), ratio,
                          per_tensor)


@dataclass
class SeedResult:
    """One seed's search: status "found" / "not_found" / "already_triggering" / "failed", the
    triggering input (the seed's shape and scale; None unless found), the queries it took, the two
    models' labels on it, and the error of a failed seed."""

    index: int
    status: str
    found: bool
    input: Optional[np.ndarray]
    queries: int
    seconds: float
    labels: Tuple[int, int]
    seed_label: int
    error: Optional[str]


@dataclass
class DiffTestResult:
    """Per seed a SeedResult (in seed order); summary: seeds, searched, found, success_rate,
    mean_queries and mean_seconds over the successful seeds, total_queries."""

    seeds: List[SeedResult]
    summary: Dict[str, Any]

    def __len__(self) -> int:
        return len(self.seeds)

    def __getitem__(self, i: int) -> SeedResult:
        return self.seeds[i]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.seeds)

    def __repr__(self) -> str:
        s = self.summary
        return (f"<nnlens.DiffTestResult {s['method']}: {s['found']} of {s['searched']} searched seeds found "
                f"(success {100 * s['success_rate']:.1f}%), mean {s['mean_queries']:.1f} queries>")


def _model(m: Any) -> Any:
    if isinstance(m, _core.Network) or not callable(m):
        return m

    def call(x: np.ndarray) -> Any:
        return as_array(m(x), "model output")

    return call


def difftest(original: Model, twin: Model, seeds: Any, *, seed: int = 1, max_queries: int = 10000,
             timeout: float = 180.0, method: str = "dflare", acceptance: str = "paper", selection: str = "paper",
             distance: str = "paper", skip_repeats: bool = False, pixel_scale: float = 255.0,
             probabilities: bool = False, threads: Optional[int] = None, progress: bool = False) -> DiffTestResult:
    """DFlare (or DiffChaser, method="diffchaser"): per seed, mutate it until the top-1 labels of
    `original` and `twin` differ, within max_queries queries and timeout seconds per seed (0: no
    limit; with a time limit the result also depends on speed).

    Either model may be a Network or a Python callable taking a float32 batch [N, ...] (the seeds'
    layout and scale) and returning logits [N, classes] (probabilities=True: probabilities); a
    callable is called in batches, one per round of the lockstep search.  seeds: [N, ...] in
    [0, 1] (times pixel_scale raw pixels in [0, 255], which the search mutates).  seed: the RNG
    seed (each input seed gets its own stream): the same seed gives the same result."""
    r = _core.difftest(_model(original), _model(twin), as_array(seeds, "seeds"), seed, max_queries, timeout, method,
                       acceptance, selection, distance, skip_repeats, pixel_scale, probabilities, threads, progress)
    out = [SeedResult(d["index"], d["status"], d["found"], d["input"], d["queries"], d["seconds"], tuple(d["labels"]),
                      d["seed_label"], d["error"]) for d in r["seeds"]]
    return DiffTestResult(out, dict(r["summary"]))
