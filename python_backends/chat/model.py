"""Triton entry point of the ``chat`` model (decoupled): a thin adapter around the batching engine.

``initialize`` reads the engine settings from the model parameters (failing the load on bad ones)
and starts the engine thread (``engine_loop``), which loads and warms up the model. ``execute``
validates each request and hands it to that thread; the engine batches all running requests at
every step and streams each request's text to its own response sender, ending every request with
exactly one FINAL flag (a cancelled one with an empty FINAL); each response carries the ids of its
tokens (``token_ids``), and optional input ``continuation`` resumes a generation after those ids
(``engine``: the gateway's resume of a stream whose worker died). Optional input ``priority`` (higher
is more important; the gateway sends the tenant tier) picks which sequence is preempted first
when the KV pool runs out. Custom metrics (labels ``model``, ``instance``): KV blocks used /
total / block size, running and waiting sequences, preemptions, prefill and decode tokens, model
steps with their wall time (busy seconds) and attended positions.
"""

import contextlib
import json
import random
import time

import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.batching import InvalidInputError, decode_texts
from python_backends.chat.engine import BatchEngine, EngineSaturatedError, EngineStats
from python_backends.chat.engine_loop import EngineLoop, Job
from python_backends.chat.params import parse_continuation, parse_params, parse_priority
from python_backends.chat.send_queue import SendQueue
from python_backends.chat.sequence import Delta
from python_backends.triton_adapter import invalid_arg_response, model_parameters, version_dir
from settings.engine import EngineConfig

INPUTS = ("prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "priority", "continuation",
          "grammar")
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
WARMUP_TIMEOUT_S = 120
CANCEL_CHECK_INTERVAL_S = 0.05  # is_cancelled() is a round trip to the server: ask at most this often
GAUGES = {
    "shunter_llm_kv_blocks_used": ("KV cache blocks in use", "kv_blocks_used"),
    "shunter_llm_kv_blocks_total": ("KV cache blocks in the pool", "kv_blocks_total"),
    "shunter_llm_kv_block_tokens": ("Tokens per KV cache block", "kv_block_tokens"),
    "shunter_llm_running_sequences": ("Sequences admitted to the running batch", "running"),
    "shunter_llm_waiting_sequences": ("Sequences waiting for admission", "waiting"),
}
COUNTERS = {
    "shunter_llm_preemptions_total": ("Sequences preempted for lack of KV blocks", "preemptions_total"),
    "shunter_llm_prefill_tokens_total": ("Prompt tokens computed (recompute included)", "prefill_tokens_total"),
    "shunter_llm_decode_tokens_total": ("Tokens decoded", "decode_tokens_total"),
    "shunter_llm_prefix_hit_tokens_total": ("Prompt tokens whose KV a slot held or copied (prefix reuse)",
                                            "prefix_hit_tokens_total"),
    "shunter_llm_steps_total": ("Model steps run", "steps_total"),
    "shunter_llm_step_seconds_total": ("Wall time of the model steps (busy time)", "step_seconds_total"),
    "shunter_llm_attention_positions_total": ("Positions the steps' tokens attended to",
                                              "attention_positions_total"),
}


def _response(delta: Delta) -> "pb_utils.InferenceResponse":
    return pb_utils.InferenceResponse(output_tensors=[
        pb_utils.Tensor("text_output", np.array([delta.text.encode("utf-8")], dtype=np.object_)),
        pb_utils.Tensor("finish_reason", np.array([(delta.finish_reason or "").encode()], dtype=np.object_)),
        pb_utils.Tensor("prompt_tokens", np.array([delta.prompt_tokens], dtype=np.int32)),
        pb_utils.Tensor("completion_tokens", np.array([delta.completion_tokens], dtype=np.int32)),
        pb_utils.Tensor("token_ids", np.array(delta.token_ids, dtype=np.int32)),
    ])


class _TritonSink:
    """One request's response sender, as the engine's ``Sink``; counts its outcome."""

    def __init__(self, model, request):
        self.model = model
        self.request = request
        self.sender = request.get_response_sender()
        self.cancelled = False
        self.checked_at = 0.0
        self.check_pending = False

    def is_cancelled(self):
        """What the last check found; a new check (a round trip to the server) is queued on the
        sender thread at most every CANCEL_CHECK_INTERVAL_S, so the engine thread never waits for
        one, and it runs before any later response of this request (the FINAL one included)."""
        now = time.monotonic()
        if not self.cancelled and not self.check_pending and now - self.checked_at >= CANCEL_CHECK_INTERVAL_S:
            self.checked_at = now
            self.check_pending = True
            self.model.submit_send(self._check_cancelled)
        return self.cancelled

    def _check_cancelled(self):
        try:
            self.cancelled = self.request.is_cancelled()
        finally:
            self.check_pending = False

    def send(self, delta):
        self.model.submit_send(lambda: self._send_now(delta))

    def _send_now(self, delta):
        if delta.finish_reason is None:
            self.sender.send(_response(delta))
            return
        if delta.finish_reason == "cancelled":
            self.sender.send(flags=FINAL)
        else:
            self.sender.send(_response(delta), flags=FINAL)
        self.model.count_finished(delta.finish_reason, delta.completion_tokens)

    def fail(self, error):
        self.model.submit_send(lambda: self._fail_now(error))

    def _fail_now(self, error):
        if isinstance(error, InvalidInputError):
            self.sender.send(invalid_arg_response(str(error)), flags=FINAL)
        elif isinstance(error, EngineSaturatedError):
            code = getattr(pb_utils.TritonError, "UNAVAILABLE", None)
            failure = pb_utils.TritonError(str(error), code) if code is not None else pb_utils.TritonError(str(error))
            self.sender.send(pb_utils.InferenceResponse(error=failure), flags=FINAL)
        else:
            failure = pb_utils.TritonError(f"generation failed: {error}")
            self.sender.send(pb_utils.InferenceResponse(error=failure), flags=FINAL)
        self.model.count_finished("error", 0)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(config):
            raise pb_utils.TritonModelException("the chat model must be decoupled")
        params = model_parameters(config)
        self.default_max_tokens = int(params.get("default_max_tokens", "256"))
        try:
            engine_config = EngineConfig.from_parameters(params)
        except ValueError as exc:
            raise pb_utils.TritonModelException(f"chat model parameters: {exc}") from exc
        model_path = version_dir(args) / params.get("model_file", "model.gguf")
        self.rng = random.Random()
        # async_send (default on): responses go out on a sender thread (send_queue.py)
        self.sends = SendQueue() if params.get("async_send", "true").lower() in ("1", "true", "yes") else None
        self._init_metrics(args["model_name"], args.get("model_instance_name", "0"))
        # Metric updates are round trips to the server too: the sender thread makes them.
        self.loop = EngineLoop(lambda: BatchEngine.load(model_path, engine_config),
                               lambda stats: self.submit_send(lambda: self.publish(stats)))
        try:
            self.loop.start(WARMUP_TIMEOUT_S)
        except (TimeoutError, RuntimeError) as exc:
            raise pb_utils.TritonModelException(str(exc)) from exc

    def execute(self, requests):
        for request in requests:
            sink = _TritonSink(self, request)
            try:
                inputs = {}
                for name in INPUTS:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is not None:
                        inputs[name] = tensor.as_numpy()
                prompt = decode_texts(inputs, "prompt")[0]
                params = parse_params(inputs, self.default_max_tokens, self.rng)
                priority = parse_priority(inputs)
                continuation = parse_continuation(inputs)
            except InvalidInputError as exc:
                sink.fail(exc)
                continue
            self.loop.submit(Job(prompt, params, priority, sink, continuation))
        return None

    def _init_metrics(self, model_name, instance_name):
        labels = {"model": model_name, "instance": instance_name}
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
        families = [finished, tokens]
        self.gauges, self.counters, self.counted = {}, {}, {}
        for kind, table, target in ((pb_utils.MetricFamily.GAUGE, GAUGES, self.gauges),
                                    (pb_utils.MetricFamily.COUNTER, COUNTERS, self.counters)):
            for name, (description, field) in table.items():
                family = pb_utils.MetricFamily(name=name, description=description, kind=kind)
                families.append(family)
                target[field] = family.Metric(labels=labels)
        self.counted = {field: 0 for field in self.counters}
        self.metric_families = families  # a family must outlive its metrics

    def publish(self, stats: EngineStats):
        """Called on the sender thread; metrics must never stop it."""
        with contextlib.suppress(Exception):
            for field, gauge in self.gauges.items():
                gauge.set(getattr(stats, field))
            for field, counter in self.counters.items():
                value = getattr(stats, field)
                if value > self.counted[field]:
                    counter.increment(value - self.counted[field])
                    self.counted[field] = value

    def submit_send(self, send):
        """Run a response send on the sender thread (or now, without one)."""
        if self.sends is None:
            send()
        else:
            self.sends.submit(send)

    def count_finished(self, reason, completion_tokens):
        with contextlib.suppress(Exception):
            self.finished[reason].increment(1)
            if completion_tokens:
                self.generated_tokens.increment(completion_tokens)

    def finalize(self):
        self.loop.stop(timeout_s=10)
        if self.sends is not None:
            self.sends.close(timeout_s=10)
