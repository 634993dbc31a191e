"""Several gateways and the shared state store: embedded x1, Redis x1 and Redis x2 on ``tabular``, side by side.

``python -m bench gateways [--repeats 5] [--duration-s 8] [--clients 1,8,16] [--profile-s 20]``

Three private stacks stay up for the whole run, each serving only ``tabular`` on ports of its own:
one gateway with the embedded store, one gateway with a Redis store, two gateways on one port
(SO_REUSEPORT) sharing a Redis store (each Redis started by its stack). Triton and its stubs are
pinned to the last CPU; the gateways, redis-server and this load generator (which also runs the
stacks' control planes) to the others. The load is ``bench.clients.GatewayClient``'s KServe v2
JSON request (one row of 64 features) from the ``demo-premium`` tenant, whose quotas are kept but
set far above what the run can use, so every request takes and gives back its fleet-wide quota in
Redis without ever being refused. For each repeat and client count the three stacks are measured
one after another (the order rotating per repeat): a warm-up loop, then a measured closed loop;
the CPU seconds of every gateway process, of redis-server, of Triton and of this process are read
from /proc around the measured loop and divided by the requests it finished. Medians over repeats.

The targets (``check_targets``, each comparison the median over repeats of the repeat's own
ratio or difference, ``paired``): the gateway's CPU per request flat within 10 % from one to two
gateway processes on the Redis store at the highest client count (and, when half that count is
measured too, two gateways against one with the same load per process); the Redis store's added
median latency against the embedded one at the lowest client count at most 0.3 ms; the
gateway's CPU per request at the highest client count at most 0.4 ms. Two cores cannot show
throughput growing with gateway processes (the second gateway shares the first one's core), so
only CPU per request is compared across them.

With ``--profile-s`` > 0, the embedded one-gateway stack is then profiled under the same load with
``py-spy record --format raw`` (py-spy on Triton's CPU); ``summarize_profile`` ranks the event
loop thread's functions by self and total samples and its packages by self samples, and the
gateway's CPU per thread is read from /proc over the same seconds. Reports: ``--out`` (JSON) and ``--markdown``,
rewritten after every measured window (marked partial until the end), and the raw profile.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.clients import GatewayClient
from bench.cpu import CpuMeter, pin_tree, trees_seconds
from bench.harness import BENCH_RESULTS, Endpoints, StackOptions, bench_stack, private_stack_options
from bench.load import RunResult, closed_loop, median
from bench.record import command_line, int_list, log, machine_facts
from bench.workload import Workload
from control.stack import free_port
from settings.paths import PROJECT_ROOT

app = typer.Typer(add_completion=False)
MODEL = "tabular"
TENANT, API_KEY = "demo-premium", "demo-premium-key"
# Far above anything the run reaches: the fleet quota path runs, and never refuses.
QUOTAS = {"requests_per_second": 1_000_000, "tokens_per_minute": 1_000_000_000, "max_concurrent": 10_000}
CPU_FLAT_TOLERANCE = 0.10
ADDED_P50_TARGET_MS = 0.3
GATEWAY_CPU_TARGET_MS = 0.4
TOP_FUNCTIONS = 15


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    store: str  # "embedded" or "redis"
    gateways: int


VARIANTS = (Variant("embedded x1", "embedded", 1), Variant("redis x1", "redis", 1), Variant("redis x2", "redis", 2))


@dataclasses.dataclass(frozen=True)
class Window:
    """One measured closed loop of one variant; CPU in ms per finished request, by component."""

    variant: str
    clients: int
    repeat: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    requests_total: int  # every request the measured loop finished: the CPU's denominator
    cpu_ms_per_request: dict[str, float]  # gateways (all processes), redis, triton, load_generator
    gateway_cpu_share: tuple[float, ...]  # each gateway process's share of the gateways' CPU
    error_samples: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class CpuSample:
    """CPU seconds so far of each component; ``gateways`` one entry per gateway process."""

    gateways: tuple[float, ...]
    redis: float | None
    triton: float
    load_generator: float


def per_request_ms(before: CpuSample, after: CpuSample, requests: int) -> tuple[dict[str, float], tuple[float, ...]]:
    """CPU ms per request of each component between two samples (the gateways summed), and each
    gateway's share of the gateways' CPU."""
    handled = max(requests, 1)
    spent = [a - b for a, b in zip(after.gateways, before.gateways, strict=True)]
    total = sum(spent)
    ms = {"gateways": 1000.0 * total / handled, "triton": 1000.0 * (after.triton - before.triton) / handled,
          "load_generator": 1000.0 * (after.load_generator - before.load_generator) / handled}
    if after.redis is not None and before.redis is not None:
        ms["redis"] = 1000.0 * (after.redis - before.redis) / handled
    shares = tuple(s / total if total > 0 else math.nan for s in spent)
    return ms, shares


def summarize(windows: list[Window]) -> list[dict[str, Any]]:
    """One cell per (clients, variant), in first-seen order: medians over its repeats."""
    cells: dict[tuple[int, str], list[Window]] = {}
    for window in windows:
        cells.setdefault((window.clients, window.variant), []).append(window)
    summary = []
    for (clients, variant), runs in cells.items():
        components = sorted({name for run in runs for name in run.cpu_ms_per_request})
        summary.append({
            "variant": variant, "clients": clients, "repeats": len(runs),
            "rps": median([r.rps for r in runs]), "p50_ms": median([r.p50_ms for r in runs]),
            "p99_ms": median([r.p99_ms for r in runs]), "errors": sum(r.errors for r in runs),
            "cpu_ms_per_request": {name: median([r.cpu_ms_per_request[name] for r in runs
                                                 if name in r.cpu_ms_per_request]) for name in components},
            "gateway_cpu_share": [median([r.gateway_cpu_share[i] for r in runs])
                                  for i in range(min(len(r.gateway_cpu_share) for r in runs))],
        })
    return summary


@dataclasses.dataclass(frozen=True)
class TargetCheck:
    what: str
    figure: str
    baseline: str
    target: str
    met: bool


def paired(windows: list[Window], first: tuple[str, int], second: tuple[str, int],
           value: Callable[[Window], float]) -> list[tuple[float, float]]:
    """``value`` of the (variant, clients) ``first`` and of ``second`` in each repeat that measured
    both: the two were measured seconds apart, so slow and fast phases of the host cancel out."""
    by = {(w.variant, w.clients, w.repeat): w for w in windows}
    repeats = sorted({w.repeat for w in windows})
    return [(value(by[(*first, r)]), value(by[(*second, r)])) for r in repeats
            if (*first, r) in by and (*second, r) in by]


def _gateway_cpu(window: Window) -> float:
    return window.cpu_ms_per_request["gateways"]


def check_targets(windows: list[Window]) -> list[TargetCheck]:
    """The targets of the module docstring (latency at the lowest client count, CPU at the highest).
    Comparisons are the median over repeats of each repeat's ratio or difference (``paired``);
    the medians of the two cells are given beside them."""
    cells = {(c["variant"], c["clients"]): c for c in summarize(windows)}
    counts = sorted({w.clients for w in windows})
    low, high = counts[0], counts[-1]

    def cpu(variant: str, clients: int = high) -> float:
        return float(cells[(variant, clients)]["cpu_ms_per_request"]["gateways"])

    def flat(clients_x1: int, note: str) -> TargetCheck:
        pairs = paired(windows, ("redis x2", high), ("redis x1", clients_x1), _gateway_cpu)
        ratio = median([a / b for a, b in pairs])
        return TargetCheck(f"gateway CPU per request, Redis store, 2 gateways at {high} clients against 1 at "
                           f"{clients_x1}{note}",
                           f"{ratio - 1:+.1%} (median of {len(pairs)} paired repeats); cell medians "
                           f"{cpu('redis x2'):.3f} against {cpu('redis x1', clients_x1):.3f} ms",
                           f"1 gateway: {cpu('redis x1', clients_x1):.3f} ms", f"within ±{CPU_FLAT_TOLERANCE:.0%}",
                           abs(ratio - 1) <= CPU_FLAT_TOLERANCE)

    pairs = paired(windows, ("redis x1", low), ("embedded x1", low), lambda w: w.p50_ms)
    added = median([a - b for a, b in pairs])
    p50 = {v: float(cells[(v, low)]["p50_ms"]) for v in ("redis x1", "embedded x1")}
    worst = max(cpu(v.name) for v in VARIANTS)
    per_process = [flat(high // 2, " (the same load per gateway process)")] if high // 2 in counts else []
    return [
        flat(high, ""), *per_process,
        TargetCheck(f"median latency the Redis store adds, 1 gateway, {low} client(s)",
                    f"{added:+.3f} ms (median of {len(pairs)} paired repeats); cell medians "
                    f"{p50['redis x1']:.3f} against {p50['embedded x1']:.3f} ms",
                    f"embedded: {p50['embedded x1']:.3f} ms", f"≤ {ADDED_P50_TARGET_MS} ms",
                    added <= ADDED_P50_TARGET_MS),
        TargetCheck(f"gateway CPU per request, {high} clients",
                    ", ".join(f"{v.name} {cpu(v.name):.3f} ms" for v in VARIANTS),
                    "0.69 ms (docs/benchmarks.md, tabular, 2026-12-01)", f"≤ {GATEWAY_CPU_TARGET_MS} ms",
                    worst <= GATEWAY_CPU_TARGET_MS),
    ]


_LINE_NUMBER = re.compile(r":\d+\)$")
_FRAME = re.compile(r"^(?P<name>.*) \((?P<file>[^()]*)\)$")


def _function(frame: str) -> str:
    return _LINE_NUMBER.sub(")", frame.strip())


def package_of(frame: str) -> str:
    """The top-level package (or stdlib module) of a py-spy frame ``name (path/file.py[:line])``."""
    match = _FRAME.match(_function(frame))
    if match is None:
        return frame
    path = match.group("file")
    for marker in ("site-packages/", "dist-packages/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            if marker.startswith("/lib/"):
                path = path.split("/", 1)[1] if "/" in path else path
            break
    path = path.removeprefix(f"{PROJECT_ROOT}/")
    first = path.split("/", 1)[0]
    return first.removesuffix(".py") or path


THREAD_ROOT = "Thread._bootstrap (threading.py)"
ENTRY_SHARE = 0.95  # functions in more of the main thread's samples than this are its entry frames


def summarize_profile(lines: Iterable[str], top: int = TOP_FUNCTIONS) -> dict[str, Any]:
    """py-spy's raw (collapsed) output, ``frame;frame;...;leaf count`` per line, summarised for the
    main thread (the event loop): the ``top`` functions by self samples (the leaf) and by total
    samples (anywhere in the stack, once per stack; the entry frames, in more than ``ENTRY_SHARE``
    of the samples, left out), and packages by self samples, shares of the main thread's samples.
    Stacks rooted in ``threading`` (other threads: gRPC's poller, whose native wait py-spy counts as
    busy) are only counted, by leaf, in ``other_threads``."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    others: Counter[str] = Counter()
    samples = 0
    for line in lines:
        stack, _, count_text = line.rstrip("\n").rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_function(f) for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        if frames[0] == THREAD_ROOT:
            others[frames[-1]] += count
            continue
        samples += count
        own[frames[-1]] += count
        packages[package_of(frames[-1])] += count
        for function in set(frames):
            total[function] += count

    def ranked(counter: Counter[str]) -> list[dict[str, Any]]:
        kept = [(name, n) for name, n in counter.most_common() if n <= ENTRY_SHARE * samples][:top]
        return [{"function": name, "samples": n, "share": n / samples} for name, n in kept]

    return {"samples": samples, "self": ranked(own), "total": ranked(total),
            "packages": [{"package": name, "samples": n, "share": n / samples} for name, n in packages.most_common()],
            "other_threads": dict(others.most_common(top))}


def thread_cpu_seconds(pid: int) -> dict[int, tuple[str, float]]:
    """Each thread of ``pid``: its name and CPU seconds so far (from /proc)."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[int(task.name)] = (name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
    return found


# --- running it -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Running:
    variant: Variant
    endpoints: Endpoints
    client: GatewayClient

    def cpu(self) -> CpuSample:
        e = self.endpoints
        assert e.triton_pid is not None
        return CpuSample(tuple(CpuMeter(pid, descendants=False).seconds() for pid in e.gateway_pids),
                         CpuMeter(e.redis_pid, descendants=False).seconds() if e.redis_pid is not None else None,
                         trees_seconds([e.triton_pid]), CpuMeter(os.getpid(), descendants=False).seconds())


def options_for(base: StackOptions, variant: Variant, index: int) -> StackOptions:
    """``variant``'s stack on ports of its own (index 0: the bench ports)."""
    store = "embedded" if variant.store == "embedded" else f"redis://127.0.0.1:{free_port()}/0"
    gateway_port = base.gateway_port + 2 * index
    return dataclasses.replace(
        base, gateway_url=f"http://127.0.0.1:{gateway_port}", gateway_port=gateway_port,
        control_port=base.control_port + 2 * index, base_port=base.base_port + 300 * index,
        gateways=variant.gateways, state_store=store, models=(MODEL,), quotas={TENANT: QUOTAS})


@contextlib.contextmanager
def running_stacks(workload: Workload, clients: int) -> Iterator[list[Running]]:
    """Every variant's stack, started one after another, stopped (all) on exit."""
    with contextlib.ExitStack() as stacks:
        started = []
        for index, variant in enumerate(VARIANTS):
            base = stacks.enter_context(private_stack_options())
            endpoints = stacks.enter_context(bench_stack(options_for(base, variant, index), log=log))
            client = GatewayClient(endpoints.gateway_url, API_KEY, workload, max_connections=max(64, clients))
            started.append(Running(variant, endpoints, client))
            log(f"{variant.name}: gateways {endpoints.gateway_pids}, redis {endpoints.redis_pid}, "
                f"tritonserver {endpoints.triton_pid}")
        yield started


def pin(stacks: list[Running]) -> dict[str, Any]:
    """Triton (with its stubs) on the last CPU; gateways, redis-server and this process on the rest."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise typer.BadParameter("pinning Triton apart needs at least 2 CPUs")
    triton, rest = {cpus[-1]}, set(cpus[:-1])
    threads: Counter[str] = Counter()
    for running in stacks:
        e = running.endpoints
        assert e.triton_pid is not None
        threads["triton"] += pin_tree(e.triton_pid, triton)
        for pid in e.gateway_pids:
            threads["gateways"] += pin_tree(pid, rest)
        if e.redis_pid is not None:
            threads["redis"] += pin_tree(e.redis_pid, rest)
    threads["load_generator"] += pin_tree(os.getpid(), rest, descendants=False)
    log(f"pinned Triton and its stubs to CPUs {sorted(triton)}; gateways, redis-server and the load "
        f"generator to {sorted(rest)}: {dict(threads)} threads")
    return {"triton_cpus": sorted(triton), "other_cpus": sorted(rest), "threads": dict(threads)}


async def measure_window(running: Running, clients: int, repeat: int, duration_s: float, warmup_s: float) -> Window:
    send = running.client.sender(MODEL)
    if warmup_s > 0:
        await closed_loop(send, clients, warmup_s, 0.0)
    before = running.cpu()
    result: RunResult = await closed_loop(send, clients, duration_s, 0.0)
    after = running.cpu()
    cpu, shares = per_request_ms(before, after, result.requests_total)
    return Window(running.variant.name, clients, repeat, result.rps, result.p50_ms, result.p99_ms, result.errors,
                  result.requests_total, cpu, shares, tuple(result.error_samples))


def rotated(items: tuple[Any, ...] | list[Any], by: int) -> list[Any]:
    """``items`` starting at index ``by`` (mod its length), wrapping around."""
    shift = by % len(items)
    return [*items[shift:], *items[:shift]]


async def profile(running: Running, clients: int, seconds: float, rate: int, raw_path: Path,
                  cpus: list[int]) -> dict[str, Any]:
    """Profile the first gateway of ``running`` with py-spy while ``clients`` closed loops run."""
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if spy is None:
        raise RuntimeError("py-spy is not installed: .venv/bin/pip install py-spy")
    load = asyncio.create_task(closed_loop(running.client.sender(MODEL), clients, seconds + 2.0, 1.0))
    await asyncio.sleep(1.0)
    pid = running.endpoints.gateway_pids[0]
    before, threads_before = running.cpu(), thread_cpu_seconds(pid)
    process = await asyncio.create_subprocess_exec(
        spy, "record", "--pid", str(pid), "--rate", str(rate), "--duration", str(int(seconds)), "--format", "raw",
        "--nolineno", "--output", str(raw_path), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
    pin_tree(process.pid, set(cpus))
    _, stderr = await process.communicate()
    after, threads_after = running.cpu(), thread_cpu_seconds(pid)
    result = await load
    if process.returncode != 0:
        raise RuntimeError(f"py-spy failed ({process.returncode}): {stderr.decode(errors='replace')[-500:]}")
    summary = summarize_profile(raw_path.read_text().splitlines())
    gateway_cpu_s = after.gateways[0] - before.gateways[0]
    threads = {f"{name} {tid}{' (main)' if tid == pid else ''}": round(seconds_after - threads_before[tid][1], 3)
               for tid, (name, seconds_after) in threads_after.items() if tid in threads_before}
    return {"gateway_pid": pid, "seconds": seconds, "rate": rate, "clients": clients, "raw": str(raw_path),
            "py_spy_cpus": cpus, "gateway_cpu_s": round(gateway_cpu_s, 3), "gateway_thread_cpu_s": threads,
            "samples_expected_if_always_on_cpu": int(seconds * rate),
            "load_rps_while_profiled": round(result.rps, 1), **summary}


# --- reports ----------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """NaN and infinities become null so that the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def markdown(result: dict[str, Any]) -> str:
    m, s = result["machine"], result["settings"]
    pinning = result.get("pinning", {})
    lines = ["```", result["command"], "```", "", f"- Date: {result['date']}",
             f"- Machine: nproc {m['nproc']}, CPU {m['cpu_model']}, {m['memory_gib']} GiB RAM, Linux {m['kernel']}, "
             f"Python {m['python']}; load average at start {m['loadavg']}, at end {result.get('loadavg_end')}",
             f"- Model `{MODEL}` (KServe v2 JSON, one row of 64 features) from tenant `{TENANT}` with quotas "
             f"{QUOTAS} (the fleet quota path runs and never refuses)",
             f"- Pinned: Triton and its stubs on CPUs {pinning.get('triton_cpus')}; every gateway, redis-server and "
             f"the load generator (with the stacks' control planes) on CPUs {pinning.get('other_cpus')}",
             f"- {s['repeats']} repeats x {s['duration_s']} s measured (+{s['warmup_s']} s warm-up) per variant and "
             "client count, variants alternating (order rotated per repeat); medians over repeats. CPU per request: "
             "/proc user+system seconds over the measured loop / requests it finished."]
    if result.get("partial", True):
        lines += ["", "**Partial results: the run did not finish.**"]
    lines += ["", "| clients | variant | repeats | req/s | p50 ms | p99 ms | gateways CPU ms/req | redis CPU ms/req | "
              "Triton CPU ms/req | load generator CPU ms/req | gateways' CPU shares | errors |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for c in result["summary"]:
        cpu = c["cpu_ms_per_request"]
        lines.append(f"| {c['clients']} | {c['variant']} | {c['repeats']} | {_num(c['rps'], 1)} | "
                     f"{_num(c['p50_ms'])} | {_num(c['p99_ms'])} | {_num(cpu.get('gateways'), 3)} | "
                     f"{_num(cpu.get('redis'), 3)} | "
                     f"{_num(cpu.get('triton'), 3)} | {_num(cpu.get('load_generator'), 3)} | "
                     f"{' / '.join(_num(x) for x in c['gateway_cpu_share'])} | {c['errors']} |")
    if result.get("targets"):
        lines += ["", "## Targets", "", "| target | figure | baseline | target | met |", "|---|---|---|---|---|"]
        lines += [f"| {t['what']} | {t['figure']} | {t['baseline']} | {t['target']} | "
                  f"{'**met**' if t['met'] else '**not met**'} |" for t in result["targets"]]
    if result.get("profile"):
        lines += _profile_lines(result["profile"])
    samples = sorted({e for w in result["windows"] for e in w["error_samples"]})
    if samples:
        lines += ["", "## Errors (samples)", "", *[f"- {e}" for e in samples[:20]]]
    return "\n".join(lines) + "\n"


def _profile_lines(p: dict[str, Any]) -> list[str]:
    lines = ["", f"## Profile of the embedded x1 gateway (py-spy {p['rate']} Hz, {p['seconds']} s, {p['clients']} "
                 f"clients, {p['samples']} samples of the main thread; {p['load_rps_while_profiled']} req/s while "
                 "profiled)", "", "Entry frames (in over 95 % of the samples) are left out of the totals.", "",
             "| by self | share | by total | share |", "|---|---:|---|---:|"]
    for own, total in zip(p["self"], p["total"], strict=False):
        lines.append(f"| `{own['function']}` | {own['share']:.1%} | `{total['function']}` | {total['share']:.1%} |")
    lines += ["", "Main thread's self samples by package: " + ", ".join(
        f"{x['package']} {x['share']:.1%}" for x in p["packages"][:TOP_FUNCTIONS]),
        "", f"Gateway CPU seconds per thread over the profile (/proc): {p['gateway_thread_cpu_s']}; "
        f"other threads' samples by leaf (py-spy counts a native wait as busy): {p['other_threads']}"]
    return lines


@dataclasses.dataclass
class Report:
    result: dict[str, Any]
    out: Path
    markdown_path: Path

    def save(self, partial: bool = True) -> None:
        self.result["partial"] = partial
        self.result["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(_clean(self.result), indent=1) + "\n")
        self.markdown_path.write_text(markdown(self.result))


def _table(cells: list[dict[str, Any]]) -> str:
    rows = [f"{'clients':>7}  {'variant':<12} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'gw ms/req':>9} "
            f"{'redis ms/req':>12} {'n':>2}"]
    for c in cells:
        cpu = c["cpu_ms_per_request"]
        rows.append(f"{c['clients']:>7}  {c['variant']:<12} {_num(c['rps'], 1):>8} {_num(c['p50_ms']):>7} "
                    f"{_num(c['p99_ms']):>7} {_num(cpu.get('gateways'), 3):>9} {_num(cpu.get('redis'), 3):>12} "
                    f"{c['repeats']:>2}")
    return "\n".join(rows)


async def measure(stacks: list[Running], clients: list[int], repeats: int, duration_s: float, warmup_s: float,
                  report: Report) -> list[Window]:
    windows: list[Window] = []
    try:
        for repeat in range(repeats):
            for count in clients:
                for running in rotated(stacks, repeat):
                    window = await measure_window(running, count, repeat, duration_s, warmup_s)
                    windows.append(window)
                    log(f"#{repeat + 1} x{count} {window.variant}: {window.rps:.1f} req/s, p50 {window.p50_ms:.2f} ms, "
                        f"p99 {window.p99_ms:.2f} ms, gateways {window.cpu_ms_per_request['gateways']:.3f} ms/req, "
                        f"redis {window.cpu_ms_per_request.get('redis', math.nan):.3f} ms/req, {window.errors} errors")
                    report.result["windows"] = [dataclasses.asdict(w) for w in windows]
                    report.result["summary"] = summarize(windows)
                    report.save()
    finally:
        for running in stacks:
            await running.client.aclose()
    return windows


Opt = typer.Option


@app.command()
def main(
    out: Annotated[Path, Opt(help="JSON report.")] = BENCH_RESULTS / "gateways.json",
    markdown_path: Annotated[Path, Opt("--markdown", help="Markdown report.")] = BENCH_RESULTS / "gateways.md",
    repeats: Annotated[int, Opt(min=1, help="Measured windows per variant and client count.")] = 5,
    duration_s: Annotated[float, Opt(min=0.5, help="Measured seconds per window.")] = 8.0,
    warmup_s: Annotated[float, Opt(min=0.0, help="Unmeasured seconds before each window.")] = 1.0,
    clients: Annotated[str, Opt(help="Closed-loop client counts (latency judged at the lowest, CPU at the "
                                     "highest).")] = "1,8,16",
    profile_s: Annotated[float, Opt(min=0.0, help="Seconds of py-spy on the embedded x1 gateway afterwards "
                                                  "(0: no profile).")] = 20.0,
    profile_rate: Annotated[int, Opt(min=1, help="py-spy samples per second.")] = 200,
) -> None:
    """Embedded x1, Redis x1, Redis x2 on tabular, side by side; see the module docstring."""
    counts = sorted(set(int_list(clients)))
    started = dt.datetime.now(dt.UTC)
    report = Report({"command": command_line(), "date": started.isoformat(timespec="seconds"),
                     "machine": machine_facts(), "model": MODEL, "tenant": TENANT, "quotas": QUOTAS,
                     "settings": {"repeats": repeats, "duration_s": duration_s, "warmup_s": warmup_s,
                                  "clients": counts, "variants": [dataclasses.asdict(v) for v in VARIANTS]},
                     "windows": [], "summary": []}, out, markdown_path)
    workload = Workload.build()
    with running_stacks(workload, max(counts)) as stacks:
        report.result["stacks"] = {r.variant.name: dataclasses.asdict(r.endpoints) for r in stacks}
        report.result["pinning"] = pin(stacks)
        windows = asyncio.run(measure(stacks, counts, repeats, duration_s, warmup_s, report))
        report.result["targets"] = [dataclasses.asdict(t) for t in check_targets(windows)]
        report.save()
        if profile_s > 0:
            embedded = GatewayClient(stacks[0].endpoints.gateway_url, API_KEY, workload, max(64, max(counts)))
            target = dataclasses.replace(stacks[0], client=embedded)
            raw = out.with_name(out.stem + "-profile.txt")
            log(f"profiling the embedded x1 gateway with py-spy for {profile_s:.0f} s")
            report.result["profile"] = asyncio.run(_profile_then_close(
                target, max(counts), profile_s, profile_rate, raw, report.result["pinning"]["triton_cpus"]))
    report.result["elapsed_s"] = round(time.time() - started.timestamp(), 1)
    report.save(partial=False)
    print(_table(report.result["summary"]))
    for t in report.result.get("targets", []):
        print(f"{'MET    ' if t['met'] else 'NOT MET'}  {t['what']}: {t['figure']} (target {t['target']})")
    log(f"wrote {out} and {markdown_path}")


async def _profile_then_close(running: Running, clients: int, seconds: float, rate: int, raw: Path,
                              cpus: list[int]) -> dict[str, Any]:
    try:
        return await profile(running, clients, seconds, rate, raw, cpus)
    finally:
        await running.client.aclose()
