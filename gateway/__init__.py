"""The gateway: OpenAI-compatible, rerank and KServe-v2 HTTP APIs in front of Triton workers."""
