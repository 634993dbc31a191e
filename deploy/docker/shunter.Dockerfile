# The gateway and control image: python:3.11-slim, the service requirements only (no torch, no
# model weights: tokenizers are fetched from the artifact store by the gateway's init container).
# Build from the repository root:
#   docker build -f deploy/docker/shunter.Dockerfile -t REGISTRY/shunter/shunter:0.1.0 .
# Gateway: python -m gateway ...; control: python -m control ... (deploy/kubernetes/base).
FROM python:3.11.11-slim-bookworm AS build

# A compiler for llama-cpp-python's sdist (portable AVX2 build, as scripts/setup.sh makes it).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
COPY deploy/docker/requirements-service.txt /tmp/requirements-service.txt
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-compile -r /tmp/requirements-service.txt

FROM python:3.11.11-slim-bookworm

# libgomp: llama.cpp's OpenMP runtime.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 shunter \
 && useradd --system --uid 10001 --gid shunter --no-create-home --shell /usr/sbin/nologin shunter
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /opt/shunter
COPY pyproject.toml README.md ./
COPY scheduling ./scheduling
COPY settings ./settings
COPY gateway ./gateway
COPY control ./control
COPY cli ./cli
# control renders the repository from these (templates, model.py adapters, warm-up samples).
COPY triton_configs ./triton_configs
COPY python_backends ./python_backends
COPY config ./config
RUN pip install --no-deps -e .
USER 10001:10001
EXPOSE 8080 8081
CMD ["python", "-m", "gateway", "--host", "0.0.0.0", "--port", "8080", "--config-dir", "/etc/shunter", "--state-dir", "/var/lib/shunter"]
