#!/usr/bin/python3
"""Exports one torchvision 0.14 classification model to ONNX with PyTorch's own logits as the oracle.

    /usr/bin/python3 scripts/zoo/export.py MODEL --opset 13|17 [--size S] [--out DIR] [--seed N]
    /usr/bin/python3 scripts/zoo/export.py --list [--all]      the model names, one per line

The model is built with random weights (torch.manual_seed(SEED), torchvision's own initialisers), in
eval mode, and every BatchNorm's running statistics and affine parameters are moved away from the
identity, so that a dropped or misfolded BatchNorm changes the logits: gamma ~ U(0.5, 1.5), beta ~
N(0, 0.1^2), the running mean and variance measured on synthetic images and then moved (mean +=
N(0, 0.1^2) * std, var *= U(0.5, 2)); see build(). LayerNorm's gamma and beta are moved the same way.

DIR (default $ZOO_DIR/MODEL-opsetN-S, $ZOO_DIR default /tmp/nnlens-zoo) receives:
  model.onnx          torch.onnx.export, input 'input' [N,3,S,S] (N dynamic), output 'output'
  input.csv           a few samples, one flattened NCHW sample per line (float32 values, each written
                      as the decimal that reads back exactly: the same numbers in f32 and in f64)
  logits_f32.csv      PyTorch's logits on input.csv, float32
  logits_f64.csv      the same model .double() on the same inputs, float64
  data.csv            synthetic images for the analyses (profile, coverage, semslice, compress), as
                      many distinct predicted classes first as the candidates have
  labels.txt          the model's own predictions on data.csv (float64), one integer per line
  seeds.csv           input.csv mapped into [0, 1] on the 1/255 grid (difftest's pixel range)
  from.csv, to.csv    the endpoints of an exact-line segment: sample 1 of input.csv, and the point
                      SEGMENT of the way from it to sample 2 (a whole segment between two random
                      images crosses tens of thousands of ReLU breaks per layer: 18,048 in
                      resnet18's first ReLU, 18 GiB of points; vgg11 at 224 x 224 needed more
                      than 9 GiB at 1e-4, 3.1 GiB at 1e-5)
  meta.json           model, opset, size, seed, versions, the ONNX op types, the ops that are not
                      piecewise-linear (first node of each), the predicted classes of data.csv,
                      timings

The export keeps BatchNormalization nodes (training=TrainingMode.PRESERVE on a model in eval mode):
torch.onnx.export's default eval export folds each BatchNorm into its Conv in float32 itself, which
leaves the file's weights 1e-7 (relative) away from the model's, so no float64 evaluation of the file
could agree with the float64 PyTorch model better than that (measured on resnet18: 1.07e-7 folded,
1.3e-12 with BatchNormalization kept).

A model already exported to DIR with the same parameters is not exported again (meta.json is the
last file written). Exit 0 on success; 1 with 'export: MESSAGE' on stderr otherwise.
"""
import argparse
import copy
import json
import os
import sys
import time

# One model per family for the default list, every model for --all.  Input sizes: the smallest
# square input each model takes (64 except where the model's pooling needs more: inception_v3
# needs 75 and takes 96 here; vgg and alexnet end in a 7x7 adaptive pool fed by a 7x7 map at 224,
# which is the size they are checked at).
FAMILIES = [
    ("alexnet", ["alexnet"]),
    ("vgg", ["vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn"]),
    ("resnet", ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152"]),
    ("resnext", ["resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d"]),
    ("wide_resnet", ["wide_resnet50_2", "wide_resnet101_2"]),
    ("squeezenet", ["squeezenet1_1", "squeezenet1_0"]),
    ("densenet", ["densenet121", "densenet161", "densenet169", "densenet201"]),
    ("googlenet", ["googlenet"]),
    ("inception", ["inception_v3"]),
    ("mobilenet_v2", ["mobilenet_v2"]),
    ("mobilenet_v3", ["mobilenet_v3_small", "mobilenet_v3_large"]),
    ("mnasnet", ["mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3"]),
    ("shufflenet", ["shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0"]),
    ("regnet_x", ["regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf"]),
    ("regnet_y", ["regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf"]),
    ("efficientnet", ["efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3",
                      "efficientnet_b4", "efficientnet_b5", "efficientnet_b6", "efficientnet_b7"]),
    ("efficientnet_v2", ["efficientnet_v2_s"]),
    ("convnext", ["convnext_tiny"]),
]
# The default list: the models the check names for each family (mobilenet_v3 has two).
DEFAULT = ["alexnet", "vgg11", "vgg11_bn", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2",
           "squeezenet1_1", "densenet121", "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3_small",
           "mobilenet_v3_large", "mnasnet0_5", "shufflenet_v2_x0_5", "regnet_x_400mf", "regnet_y_400mf",
           "efficientnet_b0", "efficientnet_v2_s", "convnext_tiny"]
# --all: every model of every family the check names (efficientnet_b0..b7 all of them).
ALL = ["alexnet", "vgg11", "vgg11_bn", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2",
       "squeezenet1_1", "densenet121", "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3_small",
       "mobilenet_v3_large", "mnasnet0_5", "shufflenet_v2_x0_5", "regnet_x_400mf", "regnet_y_400mf"] + \
      ["efficientnet_b%d" % i for i in range(8)] + ["efficientnet_v2_s", "convnext_tiny"]
# The version of what this script writes: a cached export of another version is made again.
RECIPE = 6
SIZES = {"alexnet": 224, "vgg11": 224, "vgg11_bn": 224, "inception_v3": 96}
# ONNX op types that are not piecewise-linear (ExactLine refuses them); a Mul or Div of two computed
# values (SiLU's x * Sigmoid(x), a squeeze-excitation scale) is not either.
NON_PWL_OPS = {"Sigmoid", "Tanh", "Erf", "Gelu", "LayerNormalization", "HardSwish", "Exp", "Log", "Pow",
               "Sqrt", "Reciprocal", "Softplus", "Softsign", "Mish", "Elu", "Selu", "Celu", "Softmax",
               "LogSoftmax"}


def family_of(name):
    for fam, members in FAMILIES:
        if name in members:
            return fam
    return None


def default_size(name):
    return SIZES.get(name, 64)


def default_data(size):
    """Images in data.csv: fewer for the 224 x 224 models (the analyses run forward passes on each)."""
    return 24 if size < 200 else 12


def default_segment(size):
    """The exact-line segment's share of the way from sample 1 to sample 2."""
    return 1e-3 if size < 200 else 1e-5


def build(name, seed, size):
    """The model with seeded random weights, in eval mode.  BatchNorm: gamma ~ U(0.5, 1.5), beta ~
    N(0, 0.1^2); the running statistics measured on synthetic images (a train-mode pass, cumulative
    averages), then moved: mean += N(0, 0.1^2) * std, var *= U(0.5, 2).  The last Linear (or Conv)
    layer's bias is then moved by minus its mean output on those images.  With mean 0 and variance 1
    instead, the signal fades layer after layer (measured: mobilenet_v3_small's pooled features varied
    by 1e-8 across inputs, every image was class 84), so the logits would not depend on the input and
    an error in an early layer could not show."""
    import torch
    import torchvision
    kwargs = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, transform_input=False, init_weights=True)
    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(**kwargs)
    g = torch.Generator().manual_seed(seed + 1)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.affine:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            elif isinstance(m, torch.nn.LayerNorm) and m.elementwise_affine:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
            elif hasattr(m, "layer_scale") and isinstance(m.layer_scale, torch.nn.Parameter):
                # ConvNeXt's layer scale starts at 1e-6: the blocks would vanish beside the shortcut
                m.layer_scale.copy_(torch.rand(m.layer_scale.shape, generator=g) * 0.5 + 0.5)
        if bns:
            for m in bns:
                m.reset_running_stats()
                m.momentum = None  # a cumulative average over the calibration pass
            model.train()
            torch.manual_seed(seed + 3)  # stochastic depth draws in train mode
            model(images(torch.Generator().manual_seed(seed + 4), 16 if size < 200 else 8, size))
            for m in bns:
                std = m.running_var.sqrt()
                m.running_mean.add_(torch.randn(m.running_mean.shape, generator=g) * 0.1 * std)
                m.running_var.mul_(torch.rand(m.running_var.shape, generator=g) * 1.5 + 0.5)
        model.eval()
        # The classifier's bias centres its outputs on the calibration images: a random classifier's
        # logits are mostly input-independent offsets, so every image would be one class (measured:
        # vgg11 and alexnet at 224, 24 images, one class)
        last = [m for m in model.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))][-1]
        seen = []
        hook = last.register_forward_hook(lambda mod, i, o: seen.append(o))
        model(images(torch.Generator().manual_seed(seed + 4), 16 if size < 200 else 8, size))
        hook.remove()
        if last.bias is not None:
            out = seen[0]
            last.bias.sub_(out.mean(dim=[d for d in range(out.dim()) if d != 1]))
    return model


def fmt(v):
    """A float32 value as the decimal that reads back exactly in float and in double."""
    return repr(float(v))


def write_csv(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(",".join(fmt(v) for v in r.reshape(-1)) + "\n")


def images(gen, n, size):
    """n synthetic images [n,3,S,S] (float32): smooth random fields of varying mean, contrast and
    colour, plus noise, so that a randomly initialised model predicts several classes on them."""
    import torch
    low = torch.randn(n, 3, 4, 4, generator=gen)
    field = torch.nn.functional.interpolate(low, size=(size, size), mode="bilinear", align_corners=False)
    scale = torch.rand(n, 1, 1, 1, generator=gen) * 2.5 + 0.25
    shift = torch.randn(n, 3, 1, 1, generator=gen) * 0.75
    noise = torch.randn(n, 3, size, size, generator=gen) * 0.3
    return (field * scale + shift + noise).float()


def diversify(model, x, k, per):
    """x with images nudged (signed-gradient steps on the input) until the model predicts at least k
    classes, each on at least `per` images: coverage's DSC needs more than one predicted class, and a
    randomly initialised model can predict one class on every random image (with the classifier's
    bias centred, see build(), it rarely does)."""
    import collections
    import torch
    x = x.clone()
    with torch.no_grad():
        out = model(x)
    pred = out.argmax(1).tolist()
    count = collections.Counter(pred)
    have = [c for c, n in count.items() if n >= per]
    if len(have) >= k:
        return x
    # targets: the classes with the largest mean logit that are not yet there
    mean = out.mean(0)
    targets = [c for c in mean.argsort(descending=True).tolist() if c not in have][:k - len(have)]
    # the images to move: from the most common class first, keeping `per` of each class kept
    donors = []
    for c, n in count.most_common():
        idx = [i for i, p in enumerate(pred) if p == c]
        donors += idx[per:] if c in have else idx
    donors += [i for c in have for i in [j for j, p in enumerate(pred) if p == c][:per]]
    scale = float(out.abs().max())
    for t, c in enumerate(targets):
        idx = donors[t * per:(t + 1) * per]
        if len(idx) < per:
            break
        xi = x[idx].clone()
        step = 0.05 * float(xi.std())
        for _ in range(60):
            xi.requires_grad_(True)
            o = model(xi)
            other = o.clone()
            other[:, c] = -float("inf")
            z = o[:, c] - other.max(1).values
            if bool((z > 0.02 * scale).all()):
                break
            (g,) = torch.autograd.grad(z.sum(), xi)
            with torch.no_grad():
                xi = xi + step * g.sign() * (z <= 0.02 * scale).float().view(-1, 1, 1, 1)
        x[idx] = xi.detach()
    return x


def onnx_ops(path):
    """{op type: first node} and {non-piecewise-linear op type: first node} of the ONNX graph."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    constant = {t.name for t in m.graph.initializer}
    ops, non_pwl = {}, {}
    for node in m.graph.node:
        name = node.name or node.output[0]
        ops.setdefault(node.op_type, name)
        if node.op_type == "Constant":
            constant.update(node.output)
        elif node.op_type in NON_PWL_OPS:
            non_pwl.setdefault(node.op_type, name)
        elif node.op_type in ("Mul", "Div") and all(i not in constant for i in node.input):
            non_pwl.setdefault(node.op_type + " of two computed values", name)
    return ops, non_pwl


def export(args):
    import warnings
    import numpy as np
    import torch
    import torchvision
    warnings.filterwarnings("ignore", category=UserWarning)  # PRESERVE's advice on constant folding
    if os.environ.get("ZOO_TORCH_THREADS"):  # else torch's default: every core
        torch.set_num_threads(max(1, int(os.environ["ZOO_TORCH_THREADS"])))
    size = args.size or default_size(args.model)
    args.data = args.data or default_data(size)
    args.segment = args.segment or default_segment(size)
    out = args.out or os.path.join(os.environ.get("ZOO_DIR", "/tmp/nnlens-zoo"),
                                   "%s-opset%d-%d" % (args.model, args.opset, size))
    os.makedirs(out, exist_ok=True)
    want = {"recipe": RECIPE, "model": args.model, "opset": args.opset, "size": size, "seed": args.seed,
            "samples": args.samples, "data": args.data, "classes_wanted": args.classes, "segment": args.segment, "torch": torch.__version__,
            "torchvision": torchvision.__version__}
    meta_path = os.path.join(out, "meta.json")
    if os.path.exists(meta_path) and not args.force:
        with open(meta_path) as f:
            meta = json.load(f)
        if all(meta.get(k) == v for k, v in want.items()):
            print(out)
            return 0
        if all(meta.get(k) == v for k, v in want.items() if k != "segment"):
            # only the segment differs: to.csv again from the samples, nothing else
            x = np.loadtxt(os.path.join(out, "input.csv"), delimiter=",", ndmin=2).astype(np.float32)
            write_csv(os.path.join(out, "to.csv"), x[0:1] + np.float32(args.segment) * (x[1:2] - x[0:1]))
            meta["segment"] = args.segment
            with open(meta_path + ".tmp", "w") as f:
                json.dump(meta, f, indent=1, sort_keys=True)
            os.replace(meta_path + ".tmp", meta_path)
            print(out)
            return 0
        os.remove(meta_path)

    t0 = time.time()
    model = build(args.model, args.seed, size)
    gen = torch.Generator().manual_seed(args.seed + 2)
    x = images(gen, args.samples, size)
    data = images(gen, args.data, size)
    with torch.no_grad():
        y32 = model(x)
        m64 = copy.deepcopy(model).double()
        y64 = m64(x.double())
    data = diversify(model, data, args.classes, 1)
    with torch.no_grad():
        labels = m64(data.double()).argmax(1)
    t_model = time.time() - t0

    t1 = time.time()
    onnx_path = os.path.join(out, "model.onnx")
    torch.onnx.export(model, x[:1], onnx_path, opset_version=args.opset, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "N"}, "output": {0: "N"}},
                      do_constant_folding=True, training=torch.onnx.TrainingMode.PRESERVE)
    t_export = time.time() - t1

    write_csv(os.path.join(out, "input.csv"), x.numpy())
    np.savetxt(os.path.join(out, "logits_f32.csv"), y32.numpy().astype(np.float64), delimiter=",", fmt="%.9g")
    np.savetxt(os.path.join(out, "logits_f64.csv"), y64.numpy(), delimiter=",", fmt="%.17g")
    write_csv(os.path.join(out, "data.csv"), data.numpy())
    with open(os.path.join(out, "labels.txt"), "w") as f:
        f.write("".join("%d\n" % c for c in labels.tolist()))
    write_csv(os.path.join(out, "seeds.csv"), (torch.round((0.5 + 0.25 * x).clamp(0, 1) * 255) / 255).numpy())
    a = x[0:1]
    write_csv(os.path.join(out, "from.csv"), a.numpy())
    write_csv(os.path.join(out, "to.csv"), (a + float(args.segment) * (x[1:2] - a)).numpy())

    ops, non_pwl = onnx_ops(onnx_path)
    meta = dict(want)
    meta.update({
        "family": family_of(args.model),
        "ops": sorted(ops),
        "non_pwl": non_pwl,
        "classes": sorted(set(labels.tolist())),
        "parameters": sum(p.numel() for p in model.parameters()),
        "onnx_bytes": os.path.getsize(onnx_path),
        "max_abs_logit_f64": float(y64.abs().max()),
        # how much the logits depend on the input: their spread across input.csv's samples
        "logit_spread": float((y64.max(0).values - y64.min(0).values).max() / y64.abs().max()),
        "seconds": {"model": round(t_model, 3), "export": round(t_export, 3)},
    })
    with open(meta_path + ".tmp", "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    os.replace(meta_path + ".tmp", meta_path)
    print(out)
    return 0


def main():
    ap = argparse.ArgumentParser(description="Export a torchvision model to ONNX with PyTorch's logits.")
    ap.add_argument("model", nargs="?", help="torchvision model name (e.g. resnet18)")
    ap.add_argument("--opset", type=int, default=13, choices=[13, 17])
    ap.add_argument("--size", type=int, default=0, help="input height and width (default: per model)")
    ap.add_argument("--out", default="", help="output directory (default: $ZOO_DIR/MODEL-opsetN-S)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", type=int, default=4, help="samples in input.csv (at least 2)")
    ap.add_argument("--data", type=int, default=0, help="images in data.csv (default 24; 12 at 224 x 224)")
    ap.add_argument("--classes", type=int, default=4,
                    help="predicted classes data.csv has at least (images nudged where needed)")
    ap.add_argument("--segment", type=float, default=0.0,
                    help="to.csv's share of the way from sample 1 to sample 2 (default 1e-3; 1e-5 at 224 x 224)")
    ap.add_argument("--force", action="store_true", help="export again even when DIR holds this export")
    ap.add_argument("--list", action="store_true", help="print the model names (with --all: every one)")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--families", action="store_true", help="print 'family: model ...' lines")
    ap.add_argument("--default-size", action="store_true", help="print the model's default input size")
    args = ap.parse_args()
    if args.list:
        print("\n".join(ALL if args.all else DEFAULT))
        return 0
    if args.families:
        for fam, members in FAMILIES:
            print("%s: %s" % (fam, " ".join(m for m in ALL if m in members)))
        return 0
    if not args.model:
        ap.error("MODEL is required")
    if args.default_size:
        print(default_size(args.model))
        return 0
    if args.samples < 2:
        ap.error("--samples must be at least 2")
    try:
        return export(args)
    except Exception as e:  # one line for the check's table
        msg = str(e).strip().splitlines()
        print("export: %s: %s" % (type(e).__name__, msg[0] if msg else ""), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
