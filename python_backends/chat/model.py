"""Triton entry point of the ``chat`` model (decoupled): a thin adapter around LlamaEngine.

``execute`` validates each request and queues it; one worker thread per model instance runs the
engine over the queue and streams each delta to the request's own response sender, ending every
request with exactly one FINAL flag. A request cancelled by its client stops generating at the
next token.
"""

import contextlib
import json
import queue
import random
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.batching import InvalidInputError, decode_texts
from python_backends.chat.engine import Delta, LlamaEngine
from python_backends.chat.params import GenerationParams, parse_params
from python_backends.triton_adapter import invalid_arg_response, model_parameters, version_dir

INPUTS = ("prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop")
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
WARMUP_TIMEOUT_S = 120


def _response(delta: Delta) -> "pb_utils.InferenceResponse":
    return pb_utils.InferenceResponse(output_tensors=[
        pb_utils.Tensor("text_output", np.array([delta.text.encode("utf-8")], dtype=np.object_)),
        pb_utils.Tensor("finish_reason", np.array([(delta.finish_reason or "").encode()], dtype=np.object_)),
        pb_utils.Tensor("prompt_tokens", np.array([delta.prompt_tokens], dtype=np.int32)),
        pb_utils.Tensor("completion_tokens", np.array([delta.completion_tokens], dtype=np.int32)),
    ])


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException("the chat model must be decoupled")
        params = model_parameters(config)
        self.default_max_tokens = int(params.get("default_max_tokens", "256"))
        self.engine = LlamaEngine(
            version_dir(args) / params.get("model_file", "model.gguf"),
            context_tokens=int(params["context_tokens"]),
            n_threads=int(params.get("n_threads", "2")),
        )
        self.rng = random.Random()
        self._init_metrics(args["model_name"])
        self.jobs = queue.Queue()
        self.warm = threading.Event()
        self.worker = threading.Thread(target=self._serve, name="chat-engine", daemon=True)
        self.worker.start()
        if not self.warm.wait(WARMUP_TIMEOUT_S):
            raise pb_utils.TritonModelException("the chat engine did not warm up in time")

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            try:
                inputs = {}
                for name in INPUTS:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is not None:
                        inputs[name] = tensor.as_numpy()
                prompt = decode_texts(inputs, "prompt")[0]
                params = parse_params(inputs, self.default_max_tokens, self.rng)
            except InvalidInputError as exc:
                sender.send(invalid_arg_response(str(exc)), flags=FINAL)
                continue
            self.jobs.put((request, sender, prompt, params))
        return None

    def _init_metrics(self, model_name):
        """Custom Triton metrics: requests by finish reason, generated tokens."""
        finished = pb_utils.MetricFamily(
            name="shunter_llm_requests_finished_total",
            description="Generations ended, by finish reason (stop, length, cancelled, error)",
            kind=pb_utils.MetricFamily.COUNTER)
        self.finished = {reason: finished.Metric(labels={"model": model_name, "finish_reason": reason})
                         for reason in ("stop", "length", "cancelled", "error")}
        tokens = pb_utils.MetricFamily(
            name="shunter_llm_generated_tokens_total", description="Tokens generated",
            kind=pb_utils.MetricFamily.COUNTER)
        self.generated_tokens = tokens.Metric(labels={"model": model_name})
        self.metric_families = (finished, tokens)  # a family must outlive its metrics

    def _generate(self, request, sender, prompt, params):
        """Stream one request's deltas; return its finish reason."""
        for delta in self.engine.generate(prompt, params, request.is_cancelled):
            if delta.finish_reason is None:
                sender.send(_response(delta))
                continue
            self.generated_tokens.increment(delta.completion_tokens)
            if delta.finish_reason == "cancelled":
                sender.send(flags=FINAL)
            else:
                sender.send(_response(delta), flags=FINAL)
            return delta.finish_reason
        return "error"

    def _serve(self):
        # Every llama.cpp call stays on this one thread: its OpenMP team belongs to the calling
        # thread, and a second team (e.g. from warming up on the main thread) keeps spinning and
        # halves decode speed on a 2-core host (measured: 88 -> 33 tokens/s).
        for _ in self.engine.generate("Hello", GenerationParams(max_tokens=1, temperature=0.0),
                                      lambda: False):
            pass
        self.warm.set()
        while True:
            job = self.jobs.get()
            if job is None:
                return
            request, sender, prompt, params = job
            try:
                reason = self._generate(request, sender, prompt, params)
            except InvalidInputError as exc:
                reason = "error"
                sender.send(invalid_arg_response(str(exc)), flags=FINAL)
            except Exception as exc:  # the request fails, the model keeps serving others
                reason = "error"
                failure = pb_utils.TritonError(f"generation failed: {exc}")
                sender.send(pb_utils.InferenceResponse(error=failure), flags=FINAL)
            with contextlib.suppress(Exception):  # metrics must never stop the engine thread
                self.finished[reason].increment(1)

    def finalize(self):
        self.jobs.put(None)
        self.worker.join(timeout=10)
