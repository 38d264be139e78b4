# Type stubs of the nnlens package (python/nnlens/__init__.py and its modules).
import os
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from ._core import (
    Coverage as Coverage,
    DataError as DataError,
    Error as Error,
    FormatError as FormatError,
    InvalidValueError as InvalidValueError,
    LimitError as LimitError,
    Network as Network,
    Profile as Profile,
    SemanticSlice as SemanticSlice,
    ShapeError as ShapeError,
    Slice as Slice,
    UnsupportedError as UnsupportedError,
    kmeans_1d as kmeans_1d,
    load_profile as load_profile,
    set_threads as set_threads,
    silhouette_1d as silhouette_1d,
    supported_formats as supported_formats,
    worker_threads as worker_threads,
)
from .difftest import DiffTestResult as DiffTestResult, SeedResult as SeedResult
from .exactline import ClassInterval as ClassInterval, IGResult as IGResult, Line as Line, Plane as Plane, Polygon as Polygon

__version__: str
ArrayLike = Any  # numpy arrays, torch CPU tensors, anything with __array__ or DLPack
Model = Union[Network, Callable[[np.ndarray], Any]]

def load(source: Union[str, os.PathLike, bytes, bytearray, memoryview], precision: str = "f32",
         layout: Optional[str] = None, format: Optional[str] = None) -> Network: ...
def from_torch(module: Any, example_input: ArrayLike, precision: str = "f32", opset: int = 13) -> Network: ...

def exact_line(net: Network, a: ArrayLike, b: ArrayLike, validate: bool = False, *, validate_tol: Optional[float] = None,
               merge_tol: float = 0.0, max_pieces: int = ..., max_memory: Optional[int] = None, classes: str = "argmax",
               threads: Optional[int] = None, progress: bool = False) -> Line: ...
def exact_lines(net: Network, starts: ArrayLike, ends: ArrayLike, validate: bool = False, *, errors: str = "raise",
                validate_tol: Optional[float] = None, merge_tol: float = 0.0, max_pieces: int = ...,
                max_memory: Optional[int] = None, classes: str = "argmax", threads: Optional[int] = None,
                progress: bool = False) -> List[Line]: ...
def exact_plane(net: Network, origin: ArrayLike, u: ArrayLike, v: ArrayLike,
                polygon: Sequence[Tuple[float, float]] = ..., *, max_polygons: int = ..., classes: str = "argmax") -> Plane: ...
def exact_ig(net: Network, x: ArrayLike, baseline: Any = None, target: Optional[int] = None, *,
             sums: Sequence[Tuple[str, int]] = (), max_memory: Optional[int] = None, threads: Optional[int] = None,
             progress: bool = False) -> IGResult: ...
def integrated_gradients(net: Network, inputs: ArrayLike, baselines: Any = None,
                         target: Union[None, int, Sequence[int], np.ndarray] = None, *, method: str = "exact",
                         n_steps: int = 50, max_memory: Optional[int] = None, threads: Optional[int] = None,
                         progress: bool = False) -> Tuple[np.ndarray, np.ndarray]: ...

def profile(net: Network, X: ArrayLike, granularity: str = "channel", *, batch: int = 256,
            threads: Optional[int] = None, progress: bool = False) -> Profile: ...
def slice(net: Network, profile: Profile, samples: ArrayLike, theta: float = 0.3, target: Optional[int] = None, *,
          abs_sum: bool = False, denominator: str = "sum", cutoff: str = "max", threads: Optional[int] = None,
          progress: bool = False) -> Slice: ...
def prepare_coverage(net: Network, train_x: ArrayLike, train_y: Optional[ArrayLike] = None,
                     criteria: Sequence[str] = ..., *, layer: Union[None, int, str] = None, m: int = 6,
                     nc_threshold: float = 0.75, kmnc_k: int = 1000, tknc_k: int = 3, lsc_range: str = "spec",
                     threads: Optional[int] = None) -> Coverage: ...
def coverage(net: Network, train_x: ArrayLike, train_y: Optional[ArrayLike], test_x: ArrayLike,
             criteria: Sequence[str] = ..., **options: Any) -> Dict[str, Dict[str, Any]]: ...
def semslice(net: Network, X: ArrayLike, y: ArrayLike, *, metric: str = "taylor", theta: float = 0.95,
             similarity: str = "cka", step: int = 0, samples: int = 500, seed: int = 0,
             categories: Optional[Sequence[int]] = None, metric_samples: int = 0,
             threads: Optional[int] = None) -> SemanticSlice: ...

def compress(net: Network, method: str = "int8", *, calibration: Optional[ArrayLike] = None,
             ratio: Optional[float] = None, per_tensor: bool = False) -> Network: ...
def difftest(original: Model, twin: Model, seeds: ArrayLike, *, seed: int = 1, max_queries: int = 10000,
             timeout: float = 180.0, method: str = "dflare", acceptance: str = "paper", selection: str = "paper",
             distance: str = "paper", skip_repeats: bool = False, pixel_scale: float = 255.0,
             probabilities: bool = False, threads: Optional[int] = None, progress: bool = False) -> DiffTestResult: ...
