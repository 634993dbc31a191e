"""The KServe v2 routes in-process: JSON and binary tensors, versions, metadata, readiness."""

from __future__ import annotations

import numpy as np
import tritonclient.http as httpclient

from tests.unit.gateway.conftest import PREMIUM, STANDARD, InProcessGateway

FEATURES = {"name": "features", "datatype": "FP32", "shape": [3, 64], "data": [0.5] * 192}


async def test_json_inference_is_scheduled_and_answered_in_json(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v2/models/tabular/infer", headers=PREMIUM,
                                    json={"id": "my-id", "inputs": [FEATURES]})
    assert response.status_code == 200
    body = response.json()
    assert body["model_name"] == "tabular" and body["model_version"] == "1" and body["id"] == "my-id"
    (output,) = body["outputs"]
    assert output["name"] == "class_id" and output["shape"] == [3, 1] and output["data"] == [0, 1, 2]
    assert gw.workers.tensor_calls == [("local-cpu-0", "tabular", 1)]
    assert "x-queue-wait-ms" in response.headers


async def test_binary_tensors_round_trip_as_tritonclient_sends_them(gw: InProcessGateway) -> None:
    tensor = httpclient.InferInput("features", [2, 64], "FP32")
    tensor.set_data_from_numpy(np.zeros((2, 64), dtype=np.float32), binary_data=True)
    wanted = httpclient.InferRequestedOutput("class_id", binary_data=True)
    body, json_size = httpclient.InferenceServerClient.generate_request_body([tensor], outputs=[wanted])
    response = await gw.client.post("/v2/models/tabular/infer", content=body,
                                    headers={**PREMIUM, "Inference-Header-Content-Length": str(json_size)})
    assert response.status_code == 200
    header_length = int(response.headers["inference-header-content-length"])
    result = httpclient.InferenceServerClient.parse_response_body(response.content, header_length=header_length)
    assert result.as_numpy("class_id").ravel().tolist() == [0, 1]


async def test_a_version_that_is_not_live_is_404_and_a_live_one_is_served(gw: InProcessGateway) -> None:
    gone = await gw.client.post("/v2/models/tabular/versions/7/infer", headers=PREMIUM, json={"inputs": [FEATURES]})
    assert gone.status_code == 404 and gone.json()["code"] == "model_not_found"
    live = await gw.client.post("/v2/models/tabular/versions/1/infer", headers=PREMIUM, json={"inputs": [FEATURES]})
    assert live.status_code == 200 and live.headers["x-shunter-model-version"] == "1"


async def test_kserve_errors_use_the_v2_error_body(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v2/models/tabular/infer", headers=PREMIUM, json={"inputs": []})
    assert response.status_code == 400
    body = response.json()
    assert isinstance(body["error"], str) and body["type"] == "invalid_request_error"
    chat = await gw.client.post("/v2/models/chat/infer", headers=PREMIUM, json={"inputs": [FEATURES]})
    assert chat.status_code == 400 and chat.json()["code"] == "model_not_supported"


async def test_metadata_and_readiness_follow_the_workers(gw: InProcessGateway) -> None:
    meta = await gw.client.get("/v2/models/tabular", headers=STANDARD)
    assert meta.status_code == 200
    assert meta.json()["versions"] == ["1"] and meta.json()["inputs"][0]["shape"] == [-1, 64]
    assert (await gw.client.get("/v2/models/tabular/ready", headers=STANDARD)).status_code == 200
    gw.workers.ready = False
    await gw.gateway.transport.refresh()
    assert (await gw.client.get("/v2/models/tabular/ready", headers=STANDARD)).status_code == 400
    cold = await gw.client.get("/v2/models/tabular", headers=STANDARD)
    assert cold.status_code == 503 and cold.json()["code"] == "model_cold"


async def test_server_metadata_and_a_versions_metadata(gw: InProcessGateway) -> None:
    server = await gw.client.get("/v2")
    assert server.json()["extensions"] == ["binary_tensor_data"]
    versioned = await gw.client.get("/v2/models/tabular/versions/1", headers=STANDARD)
    assert versioned.status_code == 200 and versioned.json()["name"] == "tabular"
    missing = await gw.client.get("/v2/models/tabular/versions/9", headers=STANDARD)
    assert missing.status_code == 404
