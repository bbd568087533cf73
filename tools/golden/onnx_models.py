"""Small ONNX test models for the ONNX importer (format `wgtorch-onnx-golden/1`, as
../shared/golden/README.md section "onnx/"), plus optional full-size models for the benchmark.

    python tools/golden/onnx_models.py                   # writes tests/onnx/ (about 1.3 MB, ~30 s on 1 core)
    python tools/golden/onnx_models.py --bench-dir DIR   # also writes resnet18 and a 4-layer transformer to DIR
    python tools/golden/onnx_models.py --only vit_tiny   # just the named models (index.json is merged)

Needs torch, torchvision, onnx, onnxruntime, onnxscript (for the dynamo exporter) and safetensors; a dev-time tool,
never a test dependency. CPU only, one thread, fixed seeds, eval mode, so two runs give the same references.

For every model NAME it writes into tests/onnx/:

- `NAME.onnx` -- the model; graph inputs are named `input.0`, `input.1`, ..., outputs `output.0`, ...
  A plain graph: no model-local functions (the dynamo exporter's are inlined), no external data.
- `NAME.io.safetensors` -- the inputs `input.N` (float32 or int64) and the reference outputs `output.N`
  (float32, or int64 for integer results). The reference is PyTorch's output for models PyTorch exported, and
  onnxruntime's output for graphs built with onnx.helper (those are also cross-checked here against PyTorch).
- `NAME.io_batch3.safetensors` -- only for models with a dynamic batch dimension: the same model run at batch 3.
- `index.json` -- per model: "ops" (sorted op types in the graph), "opset", "exporter" ("torchscript", "dynamo" or
  "onnx.helper"), "inputs"/"outputs" (shapes), "input_dtypes"/"output_dtypes", "onnxruntime_max_abs_diff"
  (onnxruntime vs the reference), "rtol"/"atol" (1e-4), "reference" ("pytorch" or "onnxruntime"),
  "dynamic_batch" and "dynamic_dims" (symbolic dims of graph inputs/outputs) where there are any, and a
  one-line "description".

Every model is checked with onnx.checker (full_check) and run with onnxruntime, whose outputs must match the
reference within rtol=atol=1e-4. At the end it prints which models cover each op the importer must support, and
the op types outside that list that the exporters emitted.
"""
import argparse
import contextlib
import io
import json
import os
import sys
import warnings
import zlib

import numpy as np
import onnx
import onnx.inliner
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import save_file
from torchvision.models.mobilenetv2 import InvertedResidual as InvertedResidualV2
from torchvision.models.mobilenetv3 import InvertedResidual as InvertedResidualV3
from torchvision.models.mobilenetv3 import InvertedResidualConfig
from torchvision.models.resnet import BasicBlock, Bottleneck, conv1x1
from torchvision.models.squeezenet import Fire
from torchvision.ops.misc import Conv2dNormActivation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "onnx")
RTOL = ATOL = 1e-4

# The ops the importer must support; every one must appear in at least one model below.
REQUIRED_OPS = [
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Neg", "Exp", "Log", "Erf", "Abs", "Relu", "Sigmoid", "Tanh",
    "HardSigmoid", "HardSwish", "Clip", "LeakyRelu", "Gelu", "Softmax", "LogSoftmax", "MatMul", "Gemm", "Conv",
    "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization", "LayerNormalization", "Flatten", "Reshape",
    "Transpose", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice", "Gather", "Expand", "Shape", "ConstantOfShape",
    "Constant", "Cast", "Equal", "Where", "Mod", "ReduceMean", "ReduceSum", "ReduceMax", "Identity", "Dropout",
    "LSTM", "GRU",
]

torch.set_num_threads(1)
# nn.MultiheadAttention / TransformerEncoderLayer take a fused "fast path" (aten::_native_multi_head_attention)
# under no_grad in eval mode, which the TorchScript exporter cannot export: use the ordinary path throughout.
torch.backends.mha.set_fastpath_enabled(False)
warnings.filterwarnings("ignore")


# ----------------------------------------------------------------------------------------------------------------
# Model registry
# ----------------------------------------------------------------------------------------------------------------

class Spec:
    """One test model.

    PyTorch models: `module()` builds the nn.Module (called right after torch.manual_seed(seed)), `inputs(batch, g)`
    makes the example inputs from the generator `g` (batch=None means the default batch). The same base name
    exported by both exporters shares the seed, so NAME and NAME_dynamo have the same weights, inputs and
    reference. onnx.helper models: `graph(g)` returns (ModelProto, inputs) and `check(model, inputs, outputs)`
    cross-checks onnxruntime's outputs against an independent PyTorch computation, returning the max abs difference.
    """

    def __init__(self, name, description, module=None, inputs=None, exporter="torchscript", opset=18,
                 dynamic_batch=False, export_kwargs=None, graph=None, check=None, seed_name=None, expect_ops=(),
                 ort_unsupported=None):
        self.name, self.description = name, description
        self.module, self.inputs, self.graph, self.check = module, inputs, graph, check
        self.exporter = "onnx.helper" if graph is not None else exporter
        self.opset, self.dynamic_batch = opset, dynamic_batch
        self.export_kwargs = export_kwargs or {}
        self.seed = zlib.crc32((seed_name or name).encode()) & 0x7FFFFFFF
        self.expect_ops = set(expect_ops)  # ops that must be in the exported graph (guards the intent)
        self.ort_unsupported = ort_unsupported  # why onnxruntime cannot run it (then PyTorch is the only check)


SPECS = []
BOTH = (("torchscript", 18), ("dynamo", 18))  # the default: every PyTorch model through both exporters


def torch_model(name, description, inputs, *, exporters=BOTH, dynamic_batch=False,
                export_kwargs=None, expect_ops=(), dynamo_expect_ops=(), ort_unsupported=None):
    """Decorator: register the decorated module factory once per (exporter, opset). The first variant is called
    NAME; further ones get a suffix (`_dynamo`, `_opset17`, ...). `expect_ops` must appear in the TorchScript
    exports, `dynamo_expect_ops` in the dynamo ones (the two exporters lower some things differently)."""
    def register(factory):
        for i, (exporter, opset) in enumerate(exporters):
            suffix = ""
            if i > 0:
                suffix = "_dynamo" if exporter == "dynamo" and exporters[0][0] != "dynamo" else f"_opset{opset}"
            SPECS.append(Spec(name + suffix, description, module=factory, inputs=inputs, exporter=exporter,
                              opset=opset, dynamic_batch=dynamic_batch, export_kwargs=export_kwargs,
                              seed_name=name, ort_unsupported=ort_unsupported,
                              expect_ops=dynamo_expect_ops if exporter == "dynamo" else expect_ops))
        return factory
    return register


def helper_model(name, description, check, expect_ops=()):
    """Decorator: register a graph built with onnx.helper (onnxruntime gives the reference)."""
    def register(builder):
        SPECS.append(Spec(name, description, graph=builder, check=check, expect_ops=expect_ops))
        return builder
    return register


def randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g) * scale


def randomize_norms(module, g=None):
    """Give every BatchNorm non-trivial running statistics and affine parameters (fresh ones are 0/1, which would
    hide a wrong mean/var/scale/bias order in the importer)."""
    for m in module.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g) * 0.5)
            m.running_var.copy_(torch.rand(c, generator=g) * 1.5 + 0.5)
            if m.affine:
                m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.data.copy_(torch.randn(c, generator=g) * 0.2)
        elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
            if m.bias is not None:
                m.bias.data.copy_(torch.randn(m.bias.shape, generator=g) * 0.2)
    return module


def image(batch, g, c=3, h=32, w=32):
    return [randn(g, batch or 1, c, h, w)]


# ----------------------------------------------------------------------------------------------------------------
# CNNs from torchvision's own building blocks
# ----------------------------------------------------------------------------------------------------------------

class TinyResNet(nn.Module):
    """torchvision ResNet stem (7x7/2 conv, BN, ReLU, 3x3/2 max pool) + BasicBlock, BasicBlock/2 with downsample,
    Bottleneck/2 with downsample, adaptive average pool, flatten, fc."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = BasicBlock(8, 8)
        self.layer2 = BasicBlock(8, 16, stride=2, downsample=nn.Sequential(conv1x1(8, 16, 2), nn.BatchNorm2d(16)))
        self.layer3 = Bottleneck(16, 8, stride=2, downsample=nn.Sequential(conv1x1(16, 32, 2), nn.BatchNorm2d(32)))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(32, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


@torch_model("tiny_resnet", "ResNet stem + BasicBlocks + Bottleneck (BatchNorm folded), GAP, fc; 1x3x32x32",
             image, expect_ops={"Conv", "MaxPool", "Gemm"})
def tiny_resnet():
    return randomize_norms(TinyResNet())


class TinyMobileNetV2(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            Conv2dNormActivation(3, 8, stride=2, activation_layer=nn.ReLU6),
            InvertedResidualV2(8, 8, 1, 1),    # depthwise 3x3 + project, residual
            InvertedResidualV2(8, 12, 2, 4),   # expand, depthwise stride 2, project
            InvertedResidualV2(12, 12, 1, 4),  # with residual Add
            Conv2dNormActivation(12, 32, kernel_size=1, activation_layer=nn.ReLU6),
        )
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(32, num_classes))

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


@torch_model("mobilenet_v2_tiny", "MobileNetV2 InvertedResidual blocks: depthwise conv, ReLU6 (Clip), residual Add",
             image, expect_ops={"Clip", "Conv", "Add"})
def mobilenet_v2_tiny():
    return randomize_norms(TinyMobileNetV2())


class TinyMobileNetV3(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        bn = nn.BatchNorm2d
        cfgs = [
            InvertedResidualConfig(8, 3, 8, 8, True, "RE", 2, 1, 1.0),     # SE, no expansion, stride 2
            InvertedResidualConfig(8, 3, 24, 12, False, "RE", 2, 1, 1.0),  # expansion, stride 2
            InvertedResidualConfig(12, 5, 36, 12, True, "HS", 1, 1, 1.0),  # 5x5 depthwise, SE, residual
            InvertedResidualConfig(12, 3, 48, 16, True, "HS", 1, 2, 1.0),  # dilated depthwise
        ]
        self.features = nn.Sequential(
            Conv2dNormActivation(3, 8, kernel_size=3, stride=2, norm_layer=bn, activation_layer=nn.Hardswish),
            *[InvertedResidualV3(c, bn) for c in cfgs],
            Conv2dNormActivation(16, 48, kernel_size=1, norm_layer=bn, activation_layer=nn.Hardswish),
        )
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(48, 32), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(32, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


@torch_model("mobilenet_v3_tiny", "MobileNetV3 blocks: Hardswish, SqueezeExcitation (GAP, Relu, Hardsigmoid, Mul), "
             "5x5 and dilated depthwise convs", image,
             expect_ops={"HardSwish", "HardSigmoid", "GlobalAveragePool", "Mul"})
def mobilenet_v3_tiny():
    return randomize_norms(TinyMobileNetV3())


class TinySqueezeNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, stride=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(16, 4, 8, 8), Fire(16, 4, 8, 8),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(16, 8, 16, 16),
        )
        self.classifier = nn.Sequential(nn.Dropout(p=0.5), nn.Conv2d(32, num_classes, kernel_size=1),
                                        nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


# 33x33: both ceil_mode pools see (H - 3) odd, so ceil_mode changes their output size (16 -> 8, 8 -> 4).
@torch_model("squeezenet_tiny", "SqueezeNet Fire modules (Concat), MaxPool ceil_mode=True, 1x1 conv classifier; "
             "1x3x33x33", lambda b, g: image(b, g, h=33, w=33), expect_ops={"Concat", "MaxPool", "Flatten"})
def squeezenet_tiny():
    return TinySqueezeNet()


@torch_model("conv_variants", "Conv2d with groups, depthwise, strides, dilations, asymmetric pads, padding='same' "
             "with an even kernel (auto_pad SAME_UPPER), padding='valid' (VALID), no bias; Conv1d", lambda b, g: [randn(g, b or 1, 4, 11, 13), randn(g, b or 1, 3, 20)],
             expect_ops={"Conv"})
class ConvVariants(nn.Module):
    def __init__(self):
        super().__init__()
        self.grouped = nn.Conv2d(4, 6, 3, stride=2, padding=(1, 2), dilation=(1, 2), groups=2)
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.strided = nn.Conv2d(4, 8, (1, 5), stride=(1, 3), padding=(0, 2), bias=False)
        self.same = nn.Conv2d(4, 4, (4, 3), padding="same")  # TorchScript: auto_pad=SAME_UPPER (asymmetric in H)
        self.valid = nn.Conv2d(4, 3, 3, stride=2, padding="valid")  # TorchScript: auto_pad=VALID
        self.conv1d = nn.Conv1d(3, 5, 4, stride=2, padding=1, dilation=2)

    def forward(self, x, y):
        return self.grouped(x), self.depthwise(x), self.strided(x), self.same(x), self.valid(x), self.conv1d(y)


# The TorchScript exporter writes padding="same" as auto_pad=SAME_UPPER, also with dilations, a combination that
# onnxruntime refuses ("Dilation not supported for AutoPadType::SAME_UPPER"): PyTorch's output is the only check.
@torch_model("conv_same_dilated", "Conv2d(padding='same', dilation=2) -> Conv auto_pad=SAME_UPPER with dilations "
             "(onnxruntime cannot run it)", lambda b, g: [randn(g, b or 1, 4, 11, 13)], expect_ops={"Conv"},
             exporters=(("torchscript", 18),),  # the dynamo exporter writes explicit pads (conv_variants_dynamo)
             ort_unsupported="onnxruntime 1.32: Dilation not supported for AutoPadType::SAME_UPPER")
def conv_same_dilated():
    return nn.Conv2d(4, 4, 3, padding="same", dilation=(2, 3))


class BatchNormNet(nn.Module):
    """BatchNorm on the input (nothing to fold into), Conv + BatchNorm, and BatchNorm1d on (N, C)."""

    def __init__(self):
        super().__init__()
        self.bn_in = nn.BatchNorm2d(3)
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.bn1d = nn.BatchNorm1d(8)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(self.bn_in(x))))
        return self.fc(self.bn1d(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)))


# TorchScript: TrainingMode.PRESERVE keeps the eval-mode module as is but skips the exporter's eval-only peephole
# pass, which folds BatchNorm into the preceding Conv; constant folding off keeps the BatchNormalization nodes too.
# The dynamo exporter (export_kwargs are TorchScript-only) folds the one after the Conv and keeps the other two.
@torch_model("batchnorm_unfolded", "BatchNormalization kept as nodes (2D on NCHW, 1D on NC), non-trivial stats",
             lambda b, g: image(b, g, h=8, w=8),
             export_kwargs=dict(training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False),
             expect_ops={"BatchNormalization"})
def batchnorm_unfolded():
    return randomize_norms(BatchNormNet())


# ----------------------------------------------------------------------------------------------------------------
# MLP, transformers
# ----------------------------------------------------------------------------------------------------------------

class Wrap(nn.Module):
    """forward(x) = inner(x). The TorchScript exporter turns the defaults of the traced forward's extra arguments
    into graph inputs (TransformerEncoder(Layer)'s `is_causal=False` would reach SDPA as a tensor and fail)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


class MlpLayerNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.ln1 = nn.Linear(16, 32), nn.LayerNorm(32)
        self.fc2, self.ln2 = nn.Linear(32, 32), nn.LayerNorm(32, elementwise_affine=False)
        self.fc3 = nn.Linear(32, 6)

    def forward(self, x):
        x = F.relu(self.ln1(self.fc1(x)))
        x = torch.tanh(self.ln2(self.fc2(x)))
        return F.softmax(self.fc3(x), dim=-1)


@torch_model("mlp_layernorm", "Linear/LayerNorm (affine and not)/ReLU/Tanh/Softmax MLP, dynamic batch",
             lambda b, g: [randn(g, b or 4, 16)], 
             dynamic_batch=True, expect_ops={"LayerNormalization", "Softmax"})
def mlp_layernorm():
    return randomize_norms(MlpLayerNorm())


@torch_model("vit_tiny", "torchvision VisionTransformer(image 32, patch 8, 2 layers, 2 heads, hidden 32, mlp 64)",
             image, 
             expect_ops={"LayerNormalization", "MatMul", "Softmax", "Erf"})
def vit_tiny():
    m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                                             mlp_dim=64, num_classes=10)
    # torchvision zero-initialises the head (and the class token): give them values so the output means something.
    nn.init.normal_(m.heads.head.weight, std=0.2)
    nn.init.normal_(m.heads.head.bias, std=0.1)
    nn.init.normal_(m.class_token, std=0.5)
    return randomize_norms(m)


@torch_model("transformer_prenorm", "nn.TransformerEncoderLayer(d_model 32, 4 heads, ff 64, ReLU, norm_first, "
             "batch_first); 2x6x32", lambda b, g: [randn(g, b or 2, 6, 32)],
             expect_ops={"LayerNormalization", "Softmax", "Relu"})
def transformer_prenorm():
    return Wrap(randomize_norms(nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.1, activation="relu",
                                                           batch_first=True, norm_first=True)))


# ----------------------------------------------------------------------------------------------------------------
# Recurrent
# ----------------------------------------------------------------------------------------------------------------

@torch_model("gru_batch_first", "nn.GRU(6, 8, batch_first) with an initial state; outputs (output, h_n)",
             lambda b, g: [randn(g, b or 2, 5, 6), randn(g, 1, b or 2, 8)], expect_ops={"GRU"})
def gru_batch_first():
    return nn.GRU(6, 8, batch_first=True)


@torch_model("gru_bidir_2layer", "nn.GRU(6, 8, num_layers=2, bidirectional, batch_first); outputs (output, h_n)",
             lambda b, g: [randn(g, b or 2, 5, 6)], expect_ops={"GRU"})
def gru_bidir_2layer():
    return nn.GRU(6, 8, num_layers=2, bidirectional=True, batch_first=True)


class EmbedLstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 10, bidirectional=True, batch_first=True)
        self.fc = nn.Linear(20, 5)

    def forward(self, tokens):
        y, (h, c) = self.lstm(self.embed(tokens))
        return self.fc(y), h, c


@torch_model("lstm_bidir_embed", "nn.Embedding (Gather) + bidirectional nn.LSTM(8, 10, batch_first) + Linear; "
             "int64 tokens; outputs (logits, h_n, c_n)",
             lambda b, g: [torch.randint(0, 20, (b or 2, 7), generator=g)], expect_ops={"LSTM", "Gather"})
def lstm_bidir_embed():
    return EmbedLstm()


# ----------------------------------------------------------------------------------------------------------------
# Element-wise / shape / reduction / pooling zoo
# ----------------------------------------------------------------------------------------------------------------

class ZooUnary(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.3)  # a no-op in eval mode: the output that is just the input becomes Identity

    def forward(self, x, p):
        a = torch.sqrt(torch.abs(x) + 0.5)
        b = torch.log(torch.exp(-x) + 1.0)
        c = torch.pow(a, 3.0) - torch.pow(a, p)
        d = torch.sigmoid(x) * torch.tanh(x) + F.relu(x)
        e = F.hardsigmoid(x) + F.hardswish(x)
        f = torch.clamp(x, -0.5, 0.75) + torch.clamp(x, min=0.1) + F.relu6(x) + F.leaky_relu(x, 0.1)
        h = F.gelu(x)
        return a, b, c, d, e, f, h, F.softmax(x, dim=-1), F.log_softmax(x, dim=1), self.drop(x)


@torch_model("zoo_unary", "sqrt abs exp neg log pow sigmoid tanh relu hardsigmoid hardswish clamp relu6 leaky_relu "
             "gelu(Erf) softmax log_softmax, Identity", lambda b, g: [randn(g, b or 2, 3, 4, 5),
                                                                       torch.rand(b or 2, 3, 4, 5, generator=g) * 1.5 + 0.5],
             expect_ops={"Sqrt", "Abs", "Exp", "Neg", "Log", "Pow", "HardSigmoid", "HardSwish", "Clip", "LeakyRelu",
                         "Erf", "Softmax", "LogSoftmax", "Identity"})
def zoo_unary():
    return ZooUnary()


class ZooArith(nn.Module):
    def forward(self, x, y, a, b, i, j):
        return (
            x / y - x * y,            # Div, Sub, Mul
            a @ b,                    # MatMul with batch broadcasting (2,1,3,4) @ (5,4,6) -> (2,5,3,6)
            i % j,                    # integer Mod, fmod=0 (sign of the divisor)
            torch.fmod(i, j),         # integer Mod, fmod=1 (sign of the dividend)
            torch.fmod(x, 0.7),       # float Mod, fmod=1
            x % -0.7,                 # float remainder: Div/Floor/Mul/Sub
            torch.div(i, j, rounding_mode="trunc"),  # integer Div (truncates)
        )
        # Not here: torch.floor_divide on integers. The TorchScript exporter writes it as a plain (truncating)
        # integer Div, which is off by one for negative quotients (-17 // 3 is -6 in PyTorch, -5 in the graph).


def _arith_inputs(b, g):
    n = b or 2
    j = torch.randint(1, 6, (n, 3, 4), generator=g) * (torch.randint(0, 2, (n, 3, 4), generator=g) * 2 - 1)
    return [randn(g, n, 3, 4) * 3, torch.rand(n, 3, 4, generator=g) + 0.5, randn(g, n, 1, 3, 4), randn(g, 5, 4, 6),
            torch.randint(-20, 21, (n, 3, 4), generator=g), j]


@torch_model("zoo_arith", "div sub mul, batch-broadcast matmul, integer and float Mod (fmod 0 and 1), "
             "float remainder, integer Div (trunc)", _arith_inputs, expect_ops={"Mod", "MatMul", "Div", "Sub"})
def zoo_arith():
    return ZooArith()


class ZooShape(nn.Module):
    def forward(self, x):                                   # x: (B, 6, 8)
        a, b = torch.split(x, [2, 4], dim=1)                # Split, uneven
        c0, c1, c2, c3 = x.chunk(4, dim=2)                  # Split, even
        stepped = x[:, 1:5:2, ::3]                          # Slice with steps
        last = x[:, -1]                                     # Gather, scalar index
        picked = x[:, torch.tensor([4, 0, 2])]              # Gather, index tensor
        expanded = x[:, :1, :].expand(-1, 6, 8)             # Expand
        zeros = torch.zeros(x.shape[0], 3)                  # ConstantOfShape (batch is dynamic)
        ones = x.new_ones(x.shape[0], 2, 8)
        xi = (x * 2).to(torch.int64)                        # Cast
        eq = xi == 0                                        # Equal
        picked_where = torch.where(eq, x, -x)              # Where
        sq = x[:, :, :1].squeeze(-1).unsqueeze(1)           # Squeeze, Unsqueeze
        cat = torch.cat([a * 2, b, expanded, ones], dim=1)  # Concat
        flat = x.transpose(1, 2).reshape(x.shape[0], -1)    # Transpose, Reshape
        return (cat, c0 + c3 - c1 * c2, stepped, last, picked, zeros, eq.float(), picked_where, sq, flat,
                xi)


@torch_model("zoo_shape", "split chunk strided-slice gather expand zeros/new_ones (ConstantOfShape) cast == where "
             "squeeze unsqueeze cat transpose reshape; dynamic batch", lambda b, g: [randn(g, b or 2, 6, 8)],
             exporters=(("torchscript", 18), ("torchscript", 17), ("dynamo", 18)), dynamic_batch=True,
             expect_ops={"Split", "Slice", "Gather", "Expand", "ConstantOfShape", "Cast", "Equal", "Where",
                         "Squeeze", "Unsqueeze", "Concat", "Shape"})
def zoo_shape():
    return ZooShape()


class ZooReduce(nn.Module):
    def forward(self, x):                                   # x: (2, 3, 4, 5)
        return (x.sum(dim=1), x.sum(dim=(1, 2), keepdim=True), x.sum(),
                x.mean(dim=-1), x.mean(dim=(2, 3), keepdim=True), x.mean(),
                x.amax(dim=1), x.amax(dim=(0, 2), keepdim=True))


@torch_model("zoo_reduce", "sum/mean/amax over one and several dims, keepdim 0 and 1, and over everything",
             lambda b, g: [randn(g, b or 2, 3, 4, 5)], exporters=(("torchscript", 18), ("torchscript", 17), ("dynamo", 18)),
             expect_ops={"ReduceSum", "ReduceMean", "ReduceMax"})
def zoo_reduce():
    return ZooReduce()


class ZooPool(nn.Module):
    def forward(self, x):                                   # x: (1, 3, 9, 10)
        return (F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
                F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=True),
                F.avg_pool2d(x, (2, 3), stride=(2, 1)),
                F.avg_pool2d(x, 2, ceil_mode=True),
                F.max_pool2d(x, 3, stride=1, padding=1, dilation=2),
                F.max_pool2d(x, (2, 3), stride=(2, 1), padding=(1, 1)),
                F.max_pool2d(x, 2, stride=2, ceil_mode=True),
                F.adaptive_avg_pool2d(x, 1))


@torch_model("zoo_pool", "avg_pool2d with padding, count_include_pad False/True, ceil_mode; max_pool2d with "
             "dilation, padding, ceil_mode; global average pool", lambda b, g: [randn(g, b or 1, 3, 9, 10)],
             expect_ops={"AveragePool", "MaxPool", "GlobalAveragePool"})
def zoo_pool():
    return ZooPool()


class Gelus(nn.Module):
    def forward(self, x):
        return F.gelu(x), F.gelu(x, approximate="tanh")


@torch_model("gelu_opset20", "F.gelu exact and approximate='tanh' at opset 20 (the Gelu op)",
             lambda b, g: [randn(g, b or 3, 7, scale=2.0)], exporters=(("torchscript", 20), ("dynamo", 20)),
             expect_ops={"Gelu"})
def gelu_opset20():
    return Gelus()


# ----------------------------------------------------------------------------------------------------------------
# Graphs PyTorch does not emit: built with onnx.helper, onnxruntime's outputs are the reference
# ----------------------------------------------------------------------------------------------------------------

def _tensor(name, array):
    return numpy_helper.from_array(np.array(array, order="C"), name)  # (np.ascontiguousarray makes 0-d 1-d)


def _make_model(nodes, inputs, outputs, initializers, name, opset=18):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="onnx.helper")
    model.ir_version = 8
    return model


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


CONV_W = (3, 2, 4, 3)  # an even kernel height, so SAME_UPPER and SAME_LOWER pad differently
# (no dilations with SAME_*: onnxruntime refuses them)


def _conv_auto_pad_graph(g):
    w = (torch.randn(*CONV_W, generator=g) * 0.3).numpy()
    b = (torch.randn(CONV_W[0], generator=g) * 0.1).numpy()
    x = torch.randn(1, 2, 7, 9, generator=g)
    nodes = [
        helper.make_node("Conv", ["input.0", "W", "B"], ["output.0"], auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("Conv", ["input.0", "W", "B"], ["output.1"], auto_pad="SAME_LOWER", strides=[2, 2]),
        helper.make_node("Conv", ["input.0", "W"], ["output.2"], auto_pad="VALID", strides=[2, 1]),
        helper.make_node("Conv", ["input.0", "W", "B"], ["output.3"], auto_pad="SAME_UPPER"),
        helper.make_node("Conv", ["input.0", "W", "B"], ["output.4"], auto_pad="SAME_LOWER", strides=[1, 2]),
    ]
    outs = [_vi("output.0", [1, 3, 4, 5]), _vi("output.1", [1, 3, 4, 5]), _vi("output.2", [1, 3, 2, 7]),
            _vi("output.3", [1, 3, 7, 9]), _vi("output.4", [1, 3, 7, 5])]
    model = _make_model(nodes, [_vi("input.0", [1, 2, 7, 9])], outs, [_tensor("W", w), _tensor("B", b)],
                        "conv_auto_pad")
    return model, [x]


def _same_pads(size, k, s, d, upper):
    out = -(-size // s)
    total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
    small, big = total // 2, total - total // 2
    return (small, big) if upper else (big, small)


def _conv_auto_pad_check(model, inputs, outputs):
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    x, w, b = inputs[0], inits["W"], inits["B"]
    expected = []
    for upper, stride, dil, bias in ((True, (2, 2), (1, 1), b), (False, (2, 2), (1, 1), b), (None, (2, 1), (1, 1), None),
                                     (True, (1, 1), (1, 1), b), (False, (1, 2), (1, 1), b)):
        if upper is None:
            xp = x
        else:
            ph = _same_pads(x.shape[2], w.shape[2], stride[0], dil[0], upper)
            pw = _same_pads(x.shape[3], w.shape[3], stride[1], dil[1], upper)
            xp = F.pad(x, (pw[0], pw[1], ph[0], ph[1]))
        expected.append(F.conv2d(xp, w, bias, stride=stride, dilation=dil))
    return max_diff(expected, outputs)


@helper_model("conv_auto_pad", "Conv auto_pad SAME_UPPER / SAME_LOWER (even kernel, strides 1 and 2) / VALID",
              _conv_auto_pad_check, expect_ops={"Conv"})
def conv_auto_pad(g):
    return _conv_auto_pad_graph(g)


def _fusion_check(model, inputs, outputs):
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    x, r = inputs
    w, b, w2, rb = inits["W"], inits["B"], inits["W2"], inits["RB"]
    c = F.conv2d(x, w, b, padding=1)
    expected = [torch.relu(c + r), torch.relu(F.conv2d(x, w2, None, stride=2, padding=1)), torch.relu(c), c,
                torch.relu(c + rb), torch.relu(r + c), torch.relu(c + r * 2.0),
                torch.relu(torch.relu(c + r)) - 0.5]
    return max_diff(expected, outputs)


@helper_model("conv_relu_fusion", "Conv -> [Add ->] Relu chains that wgtorch fuses at load (residual second, first, "
              "computed after the Conv; no bias, stride 2) and ones it must leave (Conv output also a graph output, "
              "a broadcast residual, a Relu after a fused chain)", _fusion_check,
              expect_ops={"Conv", "Add", "Relu", "Mul", "Sub"})
def conv_relu_fusion(g):
    x = torch.randn(2, 3, 6, 7, generator=g)
    r = torch.randn(2, 4, 6, 7, generator=g)
    w = (torch.randn(4, 3, 3, 3, generator=g) * 0.3).numpy()
    b = (torch.randn(4, generator=g) * 0.1).numpy()
    w2 = (torch.randn(5, 3, 3, 3, generator=g) * 0.3).numpy()
    rb = (torch.randn(1, 4, 1, 1, generator=g)).numpy()
    conv = lambda out: helper.make_node("Conv", ["input.0", "W", "B"], [out], pads=[1, 1, 1, 1])
    nodes = [
        conv("c1"), helper.make_node("Add", ["c1", "input.1"], ["a1"]), helper.make_node("Relu", ["a1"], ["output.0"]),
        helper.make_node("Conv", ["input.0", "W2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["output.1"]),
        conv("output.3"), helper.make_node("Relu", ["output.3"], ["output.2"]),
        conv("c4"), helper.make_node("Add", ["c4", "RB"], ["a4"]), helper.make_node("Relu", ["a4"], ["output.4"]),
        conv("c5"), helper.make_node("Add", ["input.1", "c5"], ["a5"]), helper.make_node("Relu", ["a5"], ["output.5"]),
        conv("c6"), helper.make_node("Mul", ["input.1", "two"], ["r6"]), helper.make_node("Add", ["c6", "r6"], ["a6"]),
        helper.make_node("Relu", ["a6"], ["output.6"]),
        # a Relu (after a Sub) reading a fused chain's Relu: the chain fuses, the later Relu does not
        conv("c7"), helper.make_node("Add", ["c7", "input.1"], ["a7"]), helper.make_node("Relu", ["a7"], ["r7"]),
        helper.make_node("Relu", ["r7"], ["rr7"]), helper.make_node("Sub", ["rr7", "half"], ["output.7"]),
    ]
    inits = [_tensor("W", w), _tensor("B", b), _tensor("W2", w2), _tensor("RB", rb),
             _tensor("two", np.array(2.0, dtype=np.float32)), _tensor("half", np.array(0.5, dtype=np.float32))]
    shape = [2, 4, 6, 7]
    outs = [_vi("output.0", shape), _vi("output.1", [2, 5, 3, 4])] + [_vi(f"output.{k}", shape) for k in range(2, 8)]
    model = _make_model(nodes, [_vi("input.0", [2, 3, 6, 7]), _vi("input.1", shape)], outs, inits, "conv_relu_fusion")
    return model, [x, r]


def _gemm_check(model, inputs, outputs):
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    a, a2 = inputs
    expected = [0.5 * a.T @ inits["B"].T + 2.0 * inits["C"],
                a2 @ inits["B2"],
                a.T @ inits["B2"] * 1.5 + 0.25 * inits["C2"] + 0.0,
                a2 @ inits["B"].T - 1.0]
    return max_diff(expected, outputs)


@helper_model("gemm_attrs", "Gemm with alpha/beta, transA/transB, C as (N,), (M,1) and scalar, and without C",
              _gemm_check, expect_ops={"Gemm"})
def gemm_attrs(g):
    a = torch.randn(4, 3, generator=g)       # used transposed: (3, 4)
    a2 = torch.randn(3, 4, generator=g)
    B = (torch.randn(5, 4, generator=g) * 0.5).numpy()
    B2 = (torch.randn(4, 5, generator=g) * 0.5).numpy()
    C = (torch.randn(5, generator=g)).numpy()
    C2 = (torch.randn(3, 1, generator=g)).numpy()
    nodes = [
        helper.make_node("Gemm", ["input.0", "B", "C"], ["output.0"], alpha=0.5, beta=2.0, transA=1, transB=1),
        helper.make_node("Gemm", ["input.1", "B2"], ["output.1"]),
        helper.make_node("Gemm", ["input.0", "B2", "C2"], ["output.2"], alpha=1.5, beta=0.25, transA=1),
        helper.make_node("Gemm", ["input.1", "B", "minus_one"], ["output.3"], transB=1),
    ]
    inits = [_tensor("B", B), _tensor("B2", B2), _tensor("C", C), _tensor("C2", C2),
             _tensor("minus_one", np.array(-1.0, dtype=np.float32))]
    model = _make_model(nodes, [_vi("input.0", [4, 3]), _vi("input.1", [3, 4])],
                        [_vi(f"output.{k}", [3, 5]) for k in range(4)], inits, "gemm_attrs")
    return model, [a, a2]


def _dropout_check(model, inputs, outputs):
    x = inputs[0]
    return max_diff([x * 2.0, torch.ones_like(x), x + 1.0], outputs)


@helper_model("dropout_identity", "inference Dropout (ratio given, training_mode absent / false, with mask output) "
              "and Identity", _dropout_check, expect_ops={"Dropout", "Identity"})
def dropout_identity(g):
    x = torch.randn(2, 3, 5, generator=g)
    nodes = [
        helper.make_node("Dropout", ["input.0", "ratio"], ["d0"]),
        helper.make_node("Mul", ["d0", "two"], ["d1"]),
        helper.make_node("Dropout", ["d1", "ratio", "training_mode"], ["d2", "mask"]),
        helper.make_node("Identity", ["d2"], ["output.0"]),
        helper.make_node("Cast", ["mask"], ["output.1"], to=TensorProto.FLOAT),
        helper.make_node("Dropout", ["input.0"], ["d3"]),
        helper.make_node("Add", ["d3", "one"], ["d4"]),
        helper.make_node("Identity", ["d4"], ["output.2"]),
    ]
    inits = [_tensor("ratio", np.array(0.5, dtype=np.float32)), _tensor("two", np.array(2.0, dtype=np.float32)),
             _tensor("one", np.array(1.0, dtype=np.float32)), _tensor("training_mode", np.array(False))]
    model = _make_model(nodes, [_vi("input.0", [2, 3, 5])], [_vi(f"output.{k}", [2, 3, 5]) for k in range(3)],
                        inits, "dropout_identity")
    return model, [x]


# ----------------------------------------------------------------------------------------------------------------
# Export, clean-up, verification
# ----------------------------------------------------------------------------------------------------------------

def flat_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    res = []
    for o in out:
        res.extend(flat_outputs(o))
    return res


def max_diff(expected, got):
    assert len(expected) == len(got), (len(expected), len(got))
    worst = 0.0
    for e, r in zip(expected, got):
        e = e.detach().numpy() if isinstance(e, torch.Tensor) else np.asarray(e)
        r = np.asarray(r)
        assert e.shape == r.shape, (e.shape, r.shape)
        if e.size:
            worst = max(worst, float(np.max(np.abs(e.astype(np.float64) - r.astype(np.float64)))))
        assert np.allclose(r.astype(np.float64), e.astype(np.float64), rtol=RTOL, atol=ATOL), \
            f"outside rtol/atol (max abs diff {worst})"
    return worst


def all_nodes(graph):
    """Nodes of a graph and of every subgraph (If/Loop/Scan bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from all_nodes(sub)


def rename_values(model, mapping):
    """Rename graph values everywhere (node inputs/outputs, graph inputs/outputs, value_info, initializers)."""
    if not mapping:
        return
    g = model.graph
    for node in all_nodes(g):
        node.input[:] = [mapping.get(n, n) for n in node.input]
        node.output[:] = [mapping.get(n, n) for n in node.output]
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        vi.name = mapping.get(vi.name, vi.name)
    for init in g.initializer:
        init.name = mapping.get(init.name, init.name)


def _drop_stack_traces(props):
    keep = [p for p in props if p.key not in ("pkg.torch.onnx.stack_trace", "pkg.torch.onnx.fx_node")]
    del props[:]
    props.extend(keep)


def tidy(model):
    """Inline model-local functions, drop doc strings and the dynamo exporter's per-node stack traces (file paths
    and line numbers of this script; its other metadata_props stay, as in any dynamo export), and name the graph
    inputs input.N and outputs output.N."""
    if model.functions:
        model = onnx.inliner.inline_local_functions(model)
        del model.functions[:]
    model.doc_string = ""
    model.graph.doc_string = ""
    for node in all_nodes(model.graph):
        node.doc_string = ""
        _drop_stack_traces(node.metadata_props)
    for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        _drop_stack_traces(vi.metadata_props)
        vi.doc_string = ""
    init_names = {t.name for t in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in init_names]
    mapping = {vi.name: f"input.{k}" for k, vi in enumerate(graph_inputs) if vi.name != f"input.{k}"}
    mapping.update({vi.name: f"output.{k}" for k, vi in enumerate(model.graph.output) if vi.name != f"output.{k}"})
    rename_values(model, mapping)
    return model


def export_torch(spec, module, inputs, n_outputs):
    in_names = [f"input.{k}" for k in range(len(inputs))]
    out_names = [f"output.{k}" for k in range(n_outputs)]
    if spec.exporter == "torchscript":
        dynamic_axes = {n: {0: "batch"} for n in in_names + out_names} if spec.dynamic_batch else None
        buf = io.BytesIO()
        torch.onnx.export(module, tuple(inputs), buf, dynamo=False, opset_version=spec.opset, input_names=in_names,
                          output_names=out_names, dynamic_axes=dynamic_axes, **spec.export_kwargs)
        return onnx.load_from_string(buf.getvalue())
    dynamic_shapes = None
    if spec.dynamic_batch:
        batch = torch.export.Dim("batch")
        dynamic_shapes = tuple({0: batch} for _ in inputs)
    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines
        prog = torch.onnx.export(module, tuple(inputs), dynamo=True, opset_version=spec.opset,
                                 input_names=in_names, output_names=out_names, dynamic_shapes=dynamic_shapes,
                                 verbose=False)
    return prog.model_proto


def run_ort(model, inputs):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {f"input.{k}": t.numpy() for k, t in enumerate(inputs)}
    names = [o.name for o in sess.get_outputs()]
    assert names == [f"output.{k}" for k in range(len(names))], names
    return sess.run(names, feeds)


def dims(vi):
    return [d.dim_param if d.HasField("dim_param") else d.dim_value for d in vi.type.tensor_type.shape.dim]


DTYPE_NAMES = {np.dtype("float32"): "float32", np.dtype("int64"): "int64"}


def write_io(path, inputs, outputs):
    # np.array(order="C"), not np.ascontiguousarray, which turns a 0-d result into shape (1,).
    tensors = {f"input.{k}": np.array(t.numpy(), order="C") for k, t in enumerate(inputs)}
    tensors.update({f"output.{k}": np.array(o, order="C") for k, o in enumerate(outputs)})
    for name, t in tensors.items():
        assert t.dtype in DTYPE_NAMES, (name, t.dtype)
    save_file(tensors, path)
    os.chmod(path, 0o644)  # safetensors creates the file 0600


def build_one(spec, out_dir):
    """Export/build, verify and write one model; returns its index.json entry."""
    g = torch.Generator().manual_seed(spec.seed + 1)
    if spec.graph is not None:
        model, inputs = spec.graph(g)
        reference = None
    else:
        torch.manual_seed(spec.seed)
        module = spec.module().eval()
        inputs = spec.inputs(None, g)
        with torch.no_grad():
            reference = [t.detach().clone() for t in flat_outputs(module(*inputs))]
            model = export_torch(spec, module, inputs, len(reference))
    model = tidy(model)
    onnx.checker.check_model(model, full_check=True)
    domains = {n.domain for n in all_nodes(model.graph)} - {"", "ai.onnx"}
    assert not domains, f"{spec.name}: non-standard op domains {domains}"
    ops = sorted({n.op_type for n in all_nodes(model.graph)})
    missing = spec.expect_ops - set(ops)
    assert not missing, f"{spec.name}: expected ops {sorted(missing)} not in the graph ({ops})"

    ort_out = None if spec.ort_unsupported else run_ort(model, inputs)
    entry = {"description": spec.description, "ops": ops,
             "opset": next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
             "exporter": spec.exporter}
    if reference is None:
        outputs = ort_out
        entry["reference"] = "onnxruntime"
        entry["onnxruntime_max_abs_diff"] = 0.0
        entry["torch_crosscheck_max_abs_diff"] = spec.check(model, inputs, ort_out)
    else:
        outputs = [r.numpy() for r in reference]
        entry["reference"] = "pytorch"
        if spec.ort_unsupported:
            entry["onnxruntime_max_abs_diff"] = None
            entry["onnxruntime_unsupported"] = spec.ort_unsupported
        else:
            entry["onnxruntime_max_abs_diff"] = max_diff(outputs, ort_out)
    entry.update({"inputs": [list(t.shape) for t in inputs],
                  "input_dtypes": [DTYPE_NAMES[np.dtype(t.numpy().dtype)] for t in inputs],
                  "outputs": [list(np.shape(o)) for o in outputs],
                  "output_dtypes": [DTYPE_NAMES[np.asarray(o).dtype] for o in outputs],
                  "rtol": RTOL, "atol": ATOL})
    dynamic = {}
    for vi in list(model.graph.input) + list(model.graph.output):
        sym = {str(k): d for k, d in enumerate(dims(vi)) if isinstance(d, str)}
        if sym:
            dynamic[vi.name] = sym
    if dynamic:
        entry["dynamic_dims"] = dynamic
    if spec.dynamic_batch:
        assert dynamic, f"{spec.name}: asked for a dynamic batch, the graph has static shapes"
        entry["dynamic_batch"] = True

    os.makedirs(out_dir, exist_ok=True)
    onnx.save(model, os.path.join(out_dir, spec.name + ".onnx"))
    write_io(os.path.join(out_dir, spec.name + ".io.safetensors"), inputs, outputs)

    if spec.dynamic_batch:
        g3 = torch.Generator().manual_seed(spec.seed + 3)
        inputs3 = spec.inputs(3, g3)
        with torch.no_grad():
            ref3 = [t.numpy() for t in flat_outputs(module(*inputs3))]
        entry["batch3_onnxruntime_max_abs_diff"] = max_diff(ref3, run_ort(model, inputs3))
        write_io(os.path.join(out_dir, spec.name + ".io_batch3.safetensors"), inputs3, ref3)
    return entry


# ----------------------------------------------------------------------------------------------------------------
# Benchmark models (only with --bench-dir)
# ----------------------------------------------------------------------------------------------------------------

def bench_transformer():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(256, 4, batch_first=True), 4,
                                    enable_nested_tensor=False)
    # TransformerEncoder deep-copies one layer, so all four start identical (and the exporter would store their
    # weights once): give each layer its own.
    for layer in encoder.layers:
        layer.self_attn._reset_parameters()
        layer.linear1.reset_parameters()
        layer.linear2.reset_parameters()
    return Wrap(randomize_norms(encoder))


BENCH_SPECS = [
    Spec("resnet18", "torchvision resnet18, random weights, 1x3x224x224",
         module=lambda: randomize_norms(torchvision.models.resnet18(weights=None)),
         inputs=lambda b, g: image(b, g, h=224, w=224)),
    Spec("transformer_encoder_4l", "nn.TransformerEncoder: 4 x TransformerEncoderLayer(d_model 256, 4 heads, ff 2048, "
         "ReLU, batch_first); 1x128x256",
         module=lambda: bench_transformer(),
         inputs=lambda b, g: [randn(g, b or 1, 128, 256)]),
]


# ----------------------------------------------------------------------------------------------------------------
# Main
# ----------------------------------------------------------------------------------------------------------------

def coverage(index):
    rows = []
    for op in REQUIRED_OPS:
        rows.append((op, [name for name, e in index.items() if op in e["ops"]]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-dir", help="also write the full-size benchmark models to this directory")
    parser.add_argument("--only", nargs="*", help="build only these test models (index.json is merged)")
    parser.add_argument("--out-dir", default=OUT_DIR, help="where the test models go (default tests/onnx)")
    args = parser.parse_args()

    specs = [s for s in SPECS if not args.only or s.name in args.only]
    index_path = os.path.join(args.out_dir, "index.json")
    index = {}
    if args.only and os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    for spec in specs:
        entry = build_one(spec, args.out_dir)
        index[spec.name] = entry
        size = os.path.getsize(os.path.join(args.out_dir, spec.name + ".onnx"))
        diff = entry["onnxruntime_max_abs_diff"]
        diff = "   n/a  " if diff is None else f"{diff:.2e}"
        print(f"{spec.name:28s} {spec.exporter:11s} opset {entry['opset']:2d} {size / 1024:7.1f} KB  "
              f"ort diff {diff}  {' '.join(entry['ops'])}", flush=True)
    index = dict(sorted(index.items()))
    with open(index_path, "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")

    print("\nrequired op -> models")
    uncovered = []
    for op, models in coverage(index):
        print(f"  {op:20s} {', '.join(models) if models else 'NOT COVERED'}")
        if not models:
            uncovered.append(op)
    print("\nops outside the required list")
    for name, e in index.items():
        extra = [op for op in e["ops"] if op not in REQUIRED_OPS]
        if extra:
            print(f"  {name:28s} {', '.join(extra)}")
    total = sum(os.path.getsize(os.path.join(args.out_dir, f)) for f in os.listdir(args.out_dir))
    print(f"\n{len(index)} models, {total / 1024:.0f} KB in {args.out_dir}")

    if args.bench_dir:
        bench_index = {}
        for spec in BENCH_SPECS:
            bench_index[spec.name] = build_one(spec, args.bench_dir)
            size = os.path.getsize(os.path.join(args.bench_dir, spec.name + ".onnx"))
            print(f"bench {spec.name:22s} {size / 2**20:6.1f} MB  ort diff "
                  f"{bench_index[spec.name]['onnxruntime_max_abs_diff']:.2e}", flush=True)
        with open(os.path.join(args.bench_dir, "index.json"), "w") as f:
            json.dump(bench_index, f, indent=1)
            f.write("\n")
    if uncovered and not args.only:
        sys.exit(f"required ops not covered: {', '.join(uncovered)}")


if __name__ == "__main__":
    main()
