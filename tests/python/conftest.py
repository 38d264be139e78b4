"""Shared fixtures of the Python package's tests (run by ctest: tests/python/CMakeLists.txt sets
PYTHONPATH to the built package, NNLENS_SHARED_DIR to the shared models and NNLENS_TOOL to the
command-line tool, whose results the bindings are checked against)."""

from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import nnlens

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    return Path(os.environ.get("NNLENS_SHARED_DIR", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def lenet5_path() -> Path:
    p = shared_dir() / "models" / "deepxplore-mnist" / "lenet5.onnx"
    if not p.exists():
        pytest.skip(f"{p} is not there (the shared models)")
    return p


@pytest.fixture(scope="session")
def lenet5(lenet5_path: Path) -> nnlens.Network:
    return nnlens.load(lenet5_path)


@pytest.fixture(scope="session")
def tool() -> str:
    t = os.environ.get("NNLENS_TOOL", "")
    if not t or not Path(t).exists():
        pytest.skip("the nnlens tool is not built (NNLENS_TOOL)")
    return t


def run_tool(tool: str, *args: str) -> dict:
    """`nnlens ARGS --json`'s object (the exit status may be 1: a JSON report is still printed)."""
    r = subprocess.run([tool, *map(str, args)], capture_output=True, text=True, env={**os.environ, "NNLENS_NUM_THREADS": "2"})
    assert r.stdout.strip(), r.stderr
    return json.loads(r.stdout)


def write_csv(path: Path, x: np.ndarray) -> Path:
    """One sample per line, each value as the shortest decimal of its double: the tool reads back
    exactly the values the bindings get (also at --precision f64)."""
    np.savetxt(path, np.asarray(x, np.float64).reshape(len(x), -1), delimiter=",", fmt="%.17g")
    return path


def small_cnn(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(4, 6, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(6 * 2 * 2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 5)).eval()


def small_mlp(seed: int = 0, d: int = 6, h: int = 12, out: int = 4) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Linear(h, h), torch.nn.ReLU(),
                               torch.nn.Linear(h, out)).eval()


def onnx_bytes(module: torch.nn.Module, example: torch.Tensor) -> bytes:
    buf = io.BytesIO()
    torch.onnx.export(module, example, buf, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, opset_version=13)
    return buf.getvalue()


@pytest.fixture(scope="session")
def cnn():
    """(torch module, its nnlens Network) of a small CNN on 1 x 14 x 14 images."""
    m = small_cnn()
    return m, nnlens.from_torch(m, torch.zeros(1, 1, 14, 14))


@pytest.fixture(scope="session")
def mlp():
    m = small_mlp()
    return m, nnlens.from_torch(m, torch.zeros(1, 6))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1)
