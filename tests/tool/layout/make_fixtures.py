#!/usr/bin/python3
"""tests/tool/layout/make_fixtures.py -- writes the NHWC / precision fixtures of the tool tests.

Run by hand (not at ctest time) with Debian's python3 + python3-onnx + numpy:
    /usr/bin/python3 tests/tool/layout/make_fixtures.py [--shared ../shared]
It writes, next to itself:
  nhwc_cnn.onnx            a synthetic tf2onnx-style graph: input [N,8,8,3] -> Transpose(0,3,1,2)
                           -> Conv(3->4, 3x3, pad 1) -> Relu -> MaxPool(2x2) -> Flatten -> Gemm(64->12)
                           -> Relu -> Gemm(12->5); seeded float32 weights
  cifar_nhwc.onnx          a synthetic keras2onnx-style CIFAR graph: input [N,32,32,3] -> Transpose(0,3,1,2)
                           -> Conv(3->8, 3x3) -> Relu -> Conv(8->8, 3x3, stride 2) -> Relu -> MaxPool(2x2)
                           -> Transpose(0,2,3,1) -> Flatten -> MatMul+Add(392->16) -> Relu -> MatMul+Add(16->10)
                           (the layout of Marabou's keras2onnx CNNs, with 3 channels); cifar_input.csv (4
                           NHWC rows), cifar_expected.csv, cifar_from.csv / cifar_to.csv (1 segment),
                           cifar_seg1_{kinks,samples}.csv; its own RNG, so the files above do not change
  nhwc_input.csv           6 samples, each a row of 8*8*3 values in NHWC order (h, then w, then c)
  nhwc_expected.csv        the model's outputs on them
  mnist_input.csv          4 samples of 28*28 values in [0, 1] (C = 1: NHWC and NCHW coincide)
  cnn_max_mninst{2,3}_expected.csv  the outputs of ../shared/models/marabou/cnn_max_mninst{2,3}.onnx
  nhwc_from.csv / nhwc_to.csv       2 segments (NHWC rows) for exact-line on nhwc_cnn.onnx
  mnist_from.csv / mnist_to.csv     1 segment for exact-line on cnn_max_mninst3.onnx
  *_kinks.csv              per segment, the brackets [lo, hi] in t of every point where the
                           network's restriction to the segment is not affine (its kinks)
  *_samples.csv            per segment, 129 points t = k/128 and the outputs there
Every expected value comes from the float64 NumPy interpreter below (onnx 1.12 has no
onnx.reference and there is no PyTorch here); nnlens plays no part.  The kinks are found by
recursive subdivision: an interval on which the outputs at 3 interior points are not the linear
interpolation of the ends (by 1e-13 of the outputs' scale) is halved, down to a width of 2e-11 or
until both halves look straight; the reported bracket then contains the kink.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- a float64 interpreter for the operators of these graphs -------------------------------------
def attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def conv(x, w, b, node):
    N, C, H, W = x.shape
    O, Ci, kh, kw = w.shape
    assert Ci == C and attr(node, "group", 1) == 1
    assert list(attr(node, "dilations", [1, 1])) == [1, 1]
    sh, sw = attr(node, "strides", [1, 1])
    pads = list(attr(node, "pads", [0, 0, 0, 0]))
    ap = attr(node, "auto_pad", b"NOTSET")
    assert ap in (b"NOTSET", b"VALID")
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    Ho = (x.shape[2] - kh) // sh + 1
    Wo = (x.shape[3] - kw) // sw + 1
    y = np.zeros((N, O, Ho, Wo))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + sh * Ho:sh, j:j + sw * Wo:sw]  # N,C,Ho,Wo
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if b is not None:
        y += b[None, :, None, None]
    return y


def maxpool(x, node):
    kh, kw = attr(node, "kernel_shape")
    sh, sw = attr(node, "strides", [1, 1])
    assert list(attr(node, "pads", [0, 0, 0, 0])) == [0, 0, 0, 0] and attr(node, "ceil_mode", 0) == 0
    N, C, H, W = x.shape
    Ho, Wo = (H - kh) // sh + 1, (W - kw) // sw + 1
    y = np.full((N, C, Ho, Wo), -np.inf)
    for i in range(kh):
        for j in range(kw):
            y = np.maximum(y, x[:, :, i:i + sh * Ho:sh, j:j + sw * Wo:sw])
    return y


def evaluate(model, x):
    """The model's (only) output on x (float64), by the ONNX operator definitions."""
    g = model.graph
    vals = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    vals[g.input[0].name] = np.asarray(x, dtype=np.float64)
    for n in g.node:
        i = [vals[k] if k else None for k in n.input]
        op = n.op_type
        if op == "Transpose":
            y = np.transpose(i[0], attr(n, "perm"))
        elif op == "Conv":
            y = conv(i[0], i[1], i[2] if len(i) > 2 else None, n)
        elif op == "Relu":
            y = np.maximum(i[0], 0.0)
        elif op == "MaxPool":
            y = maxpool(i[0], n)
        elif op == "Flatten":
            assert attr(n, "axis", 1) == 1
            y = i[0].reshape(i[0].shape[0], -1)
        elif op == "MatMul":
            y = i[0] @ i[1]
        elif op == "Add":
            y = i[0] + i[1]
        elif op == "Gemm":
            a, b = i[0], i[1]
            if attr(n, "transA", 0):
                a = a.T
            if attr(n, "transB", 0):
                b = b.T
            y = attr(n, "alpha", 1.0) * (a @ b)
            if len(i) > 2 and i[2] is not None:
                y = y + attr(n, "beta", 1.0) * i[2]
        else:
            raise SystemExit("make_fixtures.py: no rule for operator " + op)
        vals[n.output[0]] = y
    return vals[g.output[0].name]


# ---- the synthetic NHWC model -----------------------------------------------------------------------
def synthetic_model(rng):
    def init(name, a):
        return numpy_helper.from_array(a.astype(np.float32), name)

    wc = rng.normal(0, 0.5, (4, 3, 3, 3))
    bc = rng.normal(0, 0.1, (4,))
    w1 = rng.normal(0, 0.3, (64, 12))
    b1 = rng.normal(0, 0.1, (12,))
    w2 = rng.normal(0, 0.4, (12, 5))
    b2 = rng.normal(0, 0.1, (5,))
    nodes = [
        helper.make_node("Transpose", ["x"], ["x_nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["x_nchw", "wc", "bc"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "nhwc_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 8, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        [init("wc", wc), init("bc", bc), init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2)])
    m = helper.make_model(graph, producer_name="nnlens make_fixtures.py (tf2onnx-style NHWC input)",
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def cifar_model(rng):
    """[N,32,32,3] in the layout keras2onnx writes (as Marabou's cnn_max_mninst*.onnx)."""
    def init(name, a):
        return numpy_helper.from_array(a.astype(np.float32), name)

    w1 = rng.normal(0, 0.35, (8, 3, 3, 3))
    b1 = rng.normal(0, 0.1, (8,))
    w2 = rng.normal(0, 0.2, (8, 8, 3, 3))
    b2 = rng.normal(0, 0.1, (8,))
    wd = rng.normal(0, 0.08, (392, 16))
    bd = rng.normal(0, 0.1, (16,))
    wo = rng.normal(0, 0.3, (16, 10))
    bo = rng.normal(0, 0.1, (10,))
    nodes = [
        helper.make_node("Transpose", ["input_1"], ["adjusted_input"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["adjusted_input", "w1", "b1"], ["c1"], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["p"], ["p_nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("Flatten", ["p_nhwc"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "wd"], ["d0"]),
        helper.make_node("Add", ["d0", "bd"], ["d1"]),
        helper.make_node("Relu", ["d1"], ["d"]),
        helper.make_node("MatMul", ["d", "wo"], ["o0"]),
        helper.make_node("Add", ["o0", "bo"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes, "cifar_nhwc",
        [helper.make_tensor_value_info("input_1", TensorProto.FLOAT, ["N", 32, 32, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        [init("w1", w1), init("b1", b1), init("w2", w2), init("b2", b2), init("wd", wd), init("bd", bd),
         init("wo", wo), init("bo", bo)])
    m = helper.make_model(graph, producer_name="nnlens make_fixtures.py (keras2onnx-style NHWC CIFAR input)",
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


# ---- files ------------------------------------------------------------------------------------------
def write_rows(path, rows, fmt):
    with open(path, "w") as f:
        for r in rows:
            f.write(",".join(fmt % v for v in np.ravel(r)) + "\n")
    print("wrote", os.path.relpath(path, HERE))


def kinks(f, n0=1024, tol=1e-13, min_width=2e-11):
    """Brackets [lo, hi] of the points of [0, 1] where t -> f(t) (vector-valued) is not affine.

    An interval is "bent" when an output at 1/4, 1/2 or 3/4 of it deviates from the linear
    interpolation of its ends by more than tol times the outputs' scale.  Bent intervals are halved;
    a bent interval of width <= min_width, or one whose halves are both straight (the bend fell
    below the tolerance), is a bracket that contains a kink."""
    out = []
    fr = (0.25, 0.5, 0.75)
    scale = 1 + np.abs(f(np.linspace(0, 1, 17))).max()
    todo = [(k / n0, (k + 1) / n0, -1) for k in range(n0)]  # (lo, hi, index of the bent parent)
    parents = []
    while todo:
        a = np.array([it[0] for it in todo])
        b = np.array([it[1] for it in todo])
        ts = np.concatenate([a, b] + [a + q * (b - a) for q in fr])
        ys = f(ts)
        m = len(todo)
        ya, yb = ys[:m], ys[m:2 * m]
        bad = np.zeros(m, dtype=bool)
        for k, q in enumerate(fr):
            yq = ys[(2 + k) * m:(3 + k) * m]
            bad |= (np.abs(yq - (ya + q * (yb - ya))) > tol * scale).any(axis=1)
        bent_children = {}
        for k in range(m):
            if todo[k][2] >= 0:
                bent_children[todo[k][2]] = bent_children.get(todo[k][2], 0) + int(bad[k])
        for p, c in bent_children.items():
            if c == 0:
                out.append(parents[p])
        nxt = []
        for k in np.nonzero(bad)[0]:
            lo, hi, _ = todo[k]
            if hi - lo <= min_width:
                out.append((lo, hi))
            else:
                parents.append((lo, hi))
                mid = 0.5 * (lo + hi)
                nxt += [(lo, mid, len(parents) - 1), (mid, hi, len(parents) - 1)]
        todo = nxt
    out.sort()
    merged = []  # adjacent brackets of one kink (at a subdivision point) -> one bracket
    for lo, hi in out:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def segment_reference(model, P, Q, name, shape_of_row):
    P = np.asarray(P, dtype=np.float64)
    Q = np.asarray(Q, dtype=np.float64)

    def f(ts):
        X = P[None, :] + ts[:, None] * (Q - P)[None, :]
        return evaluate(model, X.reshape((len(ts),) + shape_of_row))

    ks = kinks(f)
    write_rows(os.path.join(HERE, name + "_kinks.csv"), [[lo, hi] for lo, hi in ks], "%.17g")
    ts = np.arange(129) / 128.0
    ys = f(ts)
    write_rows(os.path.join(HERE, name + "_samples.csv"), np.column_stack([ts, ys]), "%.17g")
    return len(ks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "..", "..", "shared"))
    args = ap.parse_args()
    rng = np.random.default_rng(20261125)

    # synthetic NHWC CNN
    m = synthetic_model(rng)
    onnx.save(m, os.path.join(HERE, "nhwc_cnn.onnx"))
    print("wrote nhwc_cnn.onnx")
    x = np.round(rng.uniform(-1, 1, (6, 8, 8, 3)), 3)  # NHWC samples; 3 decimals: exact text
    write_rows(os.path.join(HERE, "nhwc_input.csv"), x, "%.3f")
    write_rows(os.path.join(HERE, "nhwc_expected.csv"), evaluate(m, x), "%.17g")
    P = np.round(rng.uniform(-1, 1, (2, 8, 8, 3)), 3)
    Q = np.round(rng.uniform(-1, 1, (2, 8, 8, 3)), 3)
    write_rows(os.path.join(HERE, "nhwc_from.csv"), P, "%.3f")
    write_rows(os.path.join(HERE, "nhwc_to.csv"), Q, "%.3f")
    for s in range(2):
        k = segment_reference(m, P[s].ravel(), Q[s].ravel(), "nhwc_seg%d" % (s + 1), (8, 8, 3))
        print("  nhwc segment", s + 1, ":", k, "kinks")

    # Marabou's keras2onnx MNIST CNNs (NHWC [N,28,28,1])
    xm = np.round(rng.uniform(0, 1, (4, 28, 28, 1)), 3)
    write_rows(os.path.join(HERE, "mnist_input.csv"), xm, "%.3f")
    mdir = os.path.join(args.shared, "models", "marabou")
    for k in (2, 3):
        mm = onnx.load(os.path.join(mdir, "cnn_max_mninst%d.onnx" % k))
        write_rows(os.path.join(HERE, "cnn_max_mninst%d_expected.csv" % k), evaluate(mm, xm), "%.17g")
    mm = onnx.load(os.path.join(mdir, "cnn_max_mninst3.onnx"))
    a = np.round(rng.uniform(0, 1, (1, 28, 28, 1)), 3)
    b = np.clip(np.round(a + rng.uniform(-0.05, 0.05, a.shape), 3), 0, 1)
    write_rows(os.path.join(HERE, "mnist_from.csv"), a, "%.3f")
    write_rows(os.path.join(HERE, "mnist_to.csv"), b, "%.3f")
    k = segment_reference(mm, a.ravel(), b.ravel(), "mnist_seg1", (28, 28, 1))
    print("  cnn_max_mninst3 segment:", k, "kinks")

    # the [N,32,32,3] CIFAR-shaped graph (its own RNG: the fixtures above stay as they were)
    rc = np.random.default_rng(20261126)
    mc = cifar_model(rc)
    onnx.save(mc, os.path.join(HERE, "cifar_nhwc.onnx"))
    print("wrote cifar_nhwc.onnx")
    xc = np.round(rc.uniform(0, 1, (4, 32, 32, 3)), 3)
    write_rows(os.path.join(HERE, "cifar_input.csv"), xc, "%.3f")
    write_rows(os.path.join(HERE, "cifar_expected.csv"), evaluate(mc, xc), "%.17g")
    a = np.round(rc.uniform(0, 1, (1, 32, 32, 3)), 3)
    b = np.clip(np.round(a + rc.uniform(-0.1, 0.1, a.shape), 3), 0, 1)
    write_rows(os.path.join(HERE, "cifar_from.csv"), a, "%.3f")
    write_rows(os.path.join(HERE, "cifar_to.csv"), b, "%.3f")
    k = segment_reference(mc, a.ravel(), b.ravel(), "cifar_seg1", (32, 32, 3))
    print("  cifar_nhwc segment:", k, "kinks")


if __name__ == "__main__":
    sys.exit(main())
