"""EfficientNet-Lite0 export: ONNX contract and real-photo classification."""

from __future__ import annotations

import io
import pathlib

import numpy as np
import numpy.typing as npt
import onnx
import onnxruntime as ort
import pytest
from PIL import Image
from skimage import data as skdata

from control.assets.efficientnet_lite import (
    EfficientNetLite,
    ExportVerificationError,
    export_vision_model,
    verify_onnx,
)
from python_backends.vision.preprocess import decode_image, to_pixels, top_k

CAT_CLASSES = {"tabby", "tiger cat", "Egyptian cat", "Persian cat", "Siamese cat"}
COFFEE_CLASSES = {"cup", "espresso", "coffee mug"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    out_dir = tmp_path_factory.mktemp("efficientnet_lite0")
    export_vision_model(out_dir)
    return out_dir


@pytest.fixture(scope="module")
def session(exported: pathlib.Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(exported / "model.onnx"), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def labels(exported: pathlib.Path) -> list[str]:
    return (exported / "labels.txt").read_text(encoding="utf-8").splitlines()


def _photo(name: str) -> npt.NDArray[np.uint8]:
    """An RGB photo bundled with scikit-image (no download)."""
    return np.asarray(getattr(skdata, name)(), dtype=np.uint8)


def _png_bytes(photo: npt.NDArray[np.uint8]) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(photo).save(buf, format="PNG")
    return buf.getvalue()


def _top5(session: ort.InferenceSession, labels: list[str], photo: npt.NDArray[np.uint8]) -> list[str]:
    pixels = to_pixels([decode_image(_png_bytes(photo))])
    (logits,) = session.run(["logits"], {"pixels": pixels})
    _, indices = top_k(logits, 5)
    return [labels[i] for i in indices[0]]


def test_onnx_io_contract(exported: pathlib.Path) -> None:
    model = onnx.load(str(exported / "model.onnx"))
    assert model.opset_import[0].version == 17
    (inp,) = model.graph.input
    (out,) = model.graph.output
    assert inp.name == "pixels" and out.name == "logits"
    assert inp.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert out.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    in_dims = [d.dim_param or d.dim_value for d in inp.type.tensor_type.shape.dim]
    out_dims = [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim]
    assert isinstance(in_dims[0], str) and in_dims[1:] == [3, 224, 224]
    assert isinstance(out_dims[0], str) and out_dims[1:] == [1000]


def test_labels_file(labels: list[str]) -> None:
    assert len(labels) == 1000
    assert labels[:2] == ["tench", "goldfish"]
    assert labels[281] == "tabby" and labels[504] == "coffee mug"
    assert all(label.strip() == label and label for label in labels)


def test_verification_rejects_a_mismatched_graph(exported: pathlib.Path) -> None:
    untrained = EfficientNetLite().eval()  # random init: its logits differ from the export's
    with pytest.raises(ExportVerificationError, match="max abs diff"):
        verify_onnx(untrained, exported / "model.onnx")


def test_dynamic_batch(session: ort.InferenceSession) -> None:
    for batch in (1, 3):
        pixels = np.zeros((batch, 3, 224, 224), dtype=np.float32)
        (logits,) = session.run(["logits"], {"pixels": pixels})
        assert logits.shape == (batch, 1000) and logits.dtype == np.float32


def test_classifies_cat(session: ort.InferenceSession, labels: list[str]) -> None:
    top5 = _top5(session, labels, _photo("chelsea"))
    assert CAT_CLASSES & set(top5), top5


def test_classifies_coffee(session: ort.InferenceSession, labels: list[str]) -> None:
    top5 = _top5(session, labels, _photo("coffee"))
    assert COFFEE_CLASSES & set(top5), top5
