"""DFlare: compressed twins, the search against the tool's, with a Python callable as a model,
deterministic by seed, Ctrl-C from inside a callable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnlens
from conftest import onnx_bytes, run_tool, write_csv


@pytest.fixture(scope="module")
def seeds(lenet5) -> np.ndarray:
    rng = np.random.default_rng(5)
    return (np.round(rng.random((6, 1, 28, 28)) * 255) / 255).astype(np.float32)


def test_compress(lenet5, seeds) -> None:
    twin = nnlens.compress(lenet5, "int8", calibration=seeds)
    assert twin.is_int8 and twin.kind == "int8" and "int8 twin" in repr(twin)
    assert np.abs(twin(seeds) - lenet5(seeds)).max() < 1.0
    q8 = nnlens.compress(lenet5, "q8")
    assert not q8.is_int8 and np.abs(q8(seeds) - lenet5(seeds)).max() < 0.5
    pr = nnlens.compress(lenet5, "prune", ratio=0.5)
    assert pr(seeds).shape == (6, 10)
    with pytest.raises(nnlens.InvalidValueError, match="calibration"):
        nnlens.compress(lenet5, "int8")
    with pytest.raises(nnlens.InvalidValueError, match="ratio"):
        nnlens.compress(lenet5, "prune")
    with pytest.raises(nnlens.UnsupportedError, match="int8 twin"):
        nnlens.exact_line(twin, seeds[0], seeds[1])


def test_difftest_finds_and_reproduces(lenet5, seeds) -> None:
    twin = nnlens.compress(lenet5, "int8", calibration=seeds)
    r = nnlens.difftest(lenet5, twin, seeds, seed=1, max_queries=3000, timeout=0)
    assert len(r) == 6 and r.summary["searched"] + r.summary["already_triggering"] == 6
    for s in r:
        if s.found:
            assert s.input.shape == (1, 28, 28) and s.labels[0] != s.labels[1]
            a, b = lenet5(s.input[None]).argmax(), twin(s.input[None]).argmax()
            assert (a, b) == s.labels  # the triggering input reproduces the deviation
    again = nnlens.difftest(lenet5, twin, seeds, seed=1, max_queries=3000, timeout=0, threads=1)
    assert [s.queries for s in again] == [s.queries for s in r]  # the seed decides, not the threads
    # the twin as a Python callable (called in batches): the same search
    calls = []

    def twin_fn(x: np.ndarray) -> np.ndarray:
        calls.append(len(x))
        return twin(x)

    c = nnlens.difftest(lenet5, twin_fn, seeds, seed=1, max_queries=3000, timeout=0)
    assert [s.queries for s in c] == [s.queries for s in r] and max(calls) > 1
    # a torch module as the original: logits out
    m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10))
    nnlens.difftest(lambda x: m(torch.from_numpy(x)), twin, seeds[:2], seed=1, max_queries=50, timeout=0)


def test_difftest_matches_the_tool(tool: str, tmp_path: Path, lenet5_path: Path, lenet5, seeds) -> None:
    csv = write_csv(tmp_path / "seeds.csv", seeds)
    j = run_tool(tool, "difftest", lenet5_path, "int8", "--seeds", csv, "--budget-queries", 3000, "--timeout", 0,
                 "--seed", 1, "--json", "--no-progress")
    twin = nnlens.compress(lenet5, "int8", calibration=seeds)
    r = nnlens.difftest(lenet5, twin, seeds, seed=1, max_queries=3000, timeout=0)
    assert [(s["status"], s["queries"], tuple(s["labels"])) for s in j["seeds"]] == [(s.status, s.queries, s.labels) for s in r]


def test_difftest_bad_input_and_ctrl_c(lenet5, seeds) -> None:
    twin = nnlens.compress(lenet5, "q8")
    with pytest.raises(nnlens.InvalidValueError, match="pixel range"):
        nnlens.difftest(lenet5, twin, seeds * 2, max_queries=10)
    with pytest.raises(nnlens.ShapeError):
        nnlens.difftest(lenet5, twin, seeds[:, :, :10], max_queries=10)
    with pytest.raises(nnlens.InvalidValueError, match="neither"):
        nnlens.difftest(lenet5, 3, seeds, max_queries=10)
    # a callable's failure fails its seed, with the message
    r = nnlens.difftest(lenet5, lambda x: np.zeros((len(x), 3)), seeds[:2], max_queries=10, timeout=0)
    assert all(s.status == "failed" and "gave" in s.error for s in r)
    n = [0]

    def interrupted(x: np.ndarray) -> np.ndarray:
        n[0] += 1
        if n[0] == 3:
            raise KeyboardInterrupt
        return twin(x)

    with pytest.raises(KeyboardInterrupt):
        nnlens.difftest(lenet5, interrupted, seeds, max_queries=100000, timeout=0)
