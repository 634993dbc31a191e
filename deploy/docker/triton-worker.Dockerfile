# The Triton worker image: NGC tritonserver 25.01 (Triton 2.54; python, ONNX Runtime and
# TensorRT-LLM backends) with Shunter's python backends.
#
# The python backend stub: this image's stub is built for the image's own Python, 3.12 (Ubuntu
# 24.04), so our backends run on that Python rather than a stub rebuilt for 3.11: the backends
# need 3.11 or later (settings/ uses enum.StrEnum) and every package they import has 3.12 wheels
# at the pins below, while rebuilding the stub means building python_backend from source against
# 3.11 for every Triton release. Installed into the system Python the stub runs
# (PIP_BREAK_SYSTEM_PACKAGES: the image is single-purpose).
# Build from the repository root:
#   docker build -f deploy/docker/triton-worker.Dockerfile -t REGISTRY/shunter/triton-worker:0.1.0-25.01 .
FROM nvcr.io/nvidia/tritonserver:25.01-trtllm-python-py3

ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 \
    PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
COPY deploy/docker/requirements-worker.txt /tmp/requirements-worker.txt
RUN python3 -m pip install --no-compile -r /tmp/requirements-worker.txt
WORKDIR /opt/shunter
COPY pyproject.toml README.md ./
COPY python_backends ./python_backends
COPY settings ./settings
COPY scheduling ./scheduling
# Editable: the stub's Python finds python_backends (and settings) through the .pth file.
RUN python3 -m pip install --no-deps -e .
# The image's unprivileged user triton-server (uid 1000); the model repository comes from S3 (--model-repository).
USER 1000:1000
EXPOSE 8000 8001 8002
ENTRYPOINT ["tritonserver"]
