"""Rerank over plain HTTP and the KServe v2 protocol through tritonclient.http, on the real stack."""

from __future__ import annotations

import io

import numpy as np
import pytest
import skimage.data
import tritonclient.http as httpclient
from PIL import Image
from sklearn.datasets import load_digits
from tritonclient.utils import InferenceServerException

from tests.integration.conftest import GATEWAY_PORT, KEYS, RunningStack

pytestmark = pytest.mark.integration


def auth() -> dict[str, str]:
    """A fresh header dict per call: tritonclient.http adds its own headers to the dict it is given."""
    return {"Authorization": f"Bearer {KEYS['premium']}"}


def test_rerank_orders_documents_by_relevance(stack: RunningStack) -> None:
    documents = ["Bananas are rich in potassium.", "Paris is the capital and largest city of France.",
                 "France borders Spain and Belgium.", {"text": "The Louvre is a museum in Paris."}]
    with stack.client() as client:
        response = client.post("/v1/rerank", json={"model": "rerank", "query": "What is the capital of France?",
                                                   "documents": documents, "top_n": 3, "return_documents": True})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == 3
    assert results[0]["index"] == 1 and results[0]["document"]["text"].startswith("Paris")
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert 0 not in {r["index"] for r in results}


def _jpeg(photo: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(photo).save(buffer, format="JPEG")
    return buffer.getvalue()


@pytest.fixture(scope="module")
def kserve() -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(f"127.0.0.1:{GATEWAY_PORT}", network_timeout=120, connection_timeout=30)


def _classify(
    client: httpclient.InferenceServerClient, images: list[bytes], version: str = ""
) -> httpclient.InferResult:
    tensor = httpclient.InferInput("image", [len(images), 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[i] for i in images], dtype=np.object_))
    return client.infer("vision", [tensor], model_version=version, headers=auth())


def test_vision_classifies_real_photos_through_the_v2_protocol(kserve: httpclient.InferenceServerClient) -> None:
    result = _classify(kserve, [_jpeg(skimage.data.chelsea()), _jpeg(skimage.data.coffee())], version="1")
    labels = result.as_numpy("labels")
    cat = {label.decode() for label in labels[0]}
    assert cat & {"tabby", "tiger cat", "Egyptian cat"}
    assert labels[1][0].decode() in {"espresso", "cup", "coffee mug"}
    scores = result.as_numpy("scores")
    assert (np.diff(scores, axis=1) <= 0).all()


def test_a_non_image_upload_is_a_400_not_a_500(kserve: httpclient.InferenceServerClient) -> None:
    with pytest.raises(InferenceServerException) as error:
        _classify(kserve, [b"this is not an image"])
    assert error.value.status() == "400"
    assert "image" in str(error.value)


def test_tabular_classifies_digits_with_binary_and_json_tensors(kserve: httpclient.InferenceServerClient) -> None:
    digits = load_digits()
    for binary in (True, False):
        tensor = httpclient.InferInput("features", [256, 64], "FP32")
        tensor.set_data_from_numpy(digits.data[:256].astype(np.float32), binary_data=binary)
        output = httpclient.InferRequestedOutput("class_id", binary_data=binary)
        result = kserve.infer("tabular", [tensor], outputs=[output], headers=auth())
        assert (result.as_numpy("class_id").reshape(-1) == digits.target[:256]).mean() > 0.95


def test_model_metadata_and_health(kserve: httpclient.InferenceServerClient, stack: RunningStack) -> None:
    meta = kserve.get_model_metadata("tabular", headers=auth())
    assert meta["name"] == "tabular" and meta["versions"] == ["1"]
    assert meta["inputs"] == [{"name": "features", "datatype": "FP32", "shape": [-1, 64]}]
    assert kserve.is_server_ready()
    with stack.client() as client:
        assert client.get("/v2/models/vision/versions/1").json()["outputs"][0]["name"] == "scores"
        assert client.get("/v2/models/vision/versions/7").status_code == 404
