"""Autotuning: `@autotune` (or `config { autotune: true }`) measures the chosen schedule's
parameter space on the device, for the sizes of the launch, and keeps the fastest.

* **What is searched**: the schedule `schedules.build` would use (`schedules.chosen`), its
  default first, then its `space()`; for attention also the kernel library's configuration
  of the target's architecture and the kernel's `@tile` (schedules/configs.py). Each
  candidate is compiled (`device.prepare(kernel, sizes, params=Choice)`), launched once to
  warm up and then timed: CUDA events where the device reports them, else the wall clock
  around a launch and `synchronize()`; the median of up to `REPS` runs. Its output must
  equal the default's within the dtype's tolerance (`TOLERANCE`); one that does not
  compile or differs is skipped, and the reason kept in the record.
* **Budget**: `config { tune_budget: 20 }` (seconds), else `$ZYNBOOK_TUNE_BUDGET_S`, else
  `DEFAULT_BUDGET_S`. No candidate starts that would end past the budget, by the mean time
  of those before it (the default always runs). `ZYNBOOK_AUTOTUNE=0` turns tuning off (the
  defaults run, no record is read); `ZYNBOOK_AUTOTUNE=1` tunes every block.
* **Records** (zynbook/cache.py `TUNING`, under `$ZYNBOOK_CACHE_DIR/tuning`): keyed by the
  kernel's CIR hash, a size bucket, the buffers' dtypes, the schedule and the device's
  fingerprint (name, arch, driver, compiler and library versions). The bucket rounds each
  size up to a power of two, so launches of nearby sizes (a last partial batch, a sequence
  of 1000 after one of 1024) share one search; a record is used only where its parameters
  are among the candidates at the launch's own sizes, else the search runs again and
  replaces it. A later run (another process too) that finds the record compiles the winner
  alone and launches without measuring.
* **Named configurations**: `config { flash_config: "hopper" }` makes attention blocks run
  the kernel library's configuration (schedules/configs.py) without a search, checked
  against the target's shared memory (an error at the config entry); a search starts there.
* **TF32**: `config { allow_tf32: true }` lets later f32 contractions (matmul, conv2d) round
  their operands to TF32 on tensor cores, as PyTorch's `allow_tf32`: the kernel's schedule
  says so (`cir.Schedule.allow_tf32`, part of every cache key); f32 is exact otherwise.
* **Progress**: in a notebook a widget (zynbook/widgets/tuning.py), elsewhere a text bar on
  stderr: the candidate, its time and the best so far.
The launch's geometry says `tuning: tuned: <params> (x ms, n candidates)` or
`tuning: from the tuning cache: <params> (...)`; the inspector shows it.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import cache as kcache
from .backends.base import LaunchPlan
from .compiler import schedules
from .compiler.schedules import configs
from .compiler.schedules.base import Choice
from .errors import ZynMLDeviceError

DEFAULT_BUDGET_S = 60.0
REPS = 5
# relative to the default's largest magnitude: reductions in another order round otherwise
TOLERANCE = {"f64": 1e-9, "f32": 1e-4, "f16": 1e-2, "bf16": 2e-2}
_OFF = ("0", "false", "no", "off")

# what this process did: searches run, records used, candidates compiled
STATS = {"searches": 0, "from_cache": 0, "candidates": 0}


@dataclass(frozen=True)
class Settings:
    """A session's `config { autotune: ..., tune_budget: ..., flash_config: ... }`."""
    autotune: bool = False
    budget_s: float | None = None
    flash_config: str | None = None     # a name of configs.CONFIGS
    flash_span: Any = field(default=None, compare=False)     # where it was set (for errors)
    allow_tf32: bool = False            # f32 contractions may run on TF32 tensor cores


def allowing_tf32(kernel, settings: Settings | None):
    """`kernel` with TF32 allowed in its schedule where the session allows it."""
    if settings is None or not settings.allow_tf32 or kernel.schedule.allow_tf32:
        return kernel
    return dataclasses.replace(kernel, schedule=dataclasses.replace(kernel.schedule, allow_tf32=True))


def wanted(kernel, settings: Settings | None) -> bool:
    env = os.environ.get("ZYNBOOK_AUTOTUNE", "").strip().lower()
    if env in _OFF:
        return False
    return env in ("1", "true", "yes", "on") or bool(kernel.schedule.autotune) or \
        bool(settings and settings.autotune)


def budget(settings: Settings | None) -> float:
    if settings is not None and settings.budget_s is not None:
        return float(settings.budget_s)
    try:
        value = float(os.environ.get("ZYNBOOK_TUNE_BUDGET_S", DEFAULT_BUDGET_S))
    except ValueError:
        return DEFAULT_BUDGET_S
    # NaN compares false with every time spent: no candidate would ever be stopped
    return DEFAULT_BUDGET_S if np.isnan(value) else value


def takes_params(device) -> bool:
    """Whether the device compiles given schedule parameters (`prepare(..., params=)`)."""
    try:
        return "params" in inspect.signature(device.prepare).parameters
    except (TypeError, ValueError):
        return False


def _named(kernel, settings: Settings | None):
    """The session's `flash_config` where `kernel` is an attention, else None."""
    if settings is None or settings.flash_config is None or \
            kernel.kernel_type.kind not in ("attention", "flash_attention"):
        return None
    return configs.CONFIGS[settings.flash_config]


def prepare(device, kernel, sizes: dict, settings: Settings | None = None) -> LaunchPlan:
    """The device's launch plan of `kernel` at `sizes`: tuned where asked and possible; an
    attention with the session's `flash_config` (and no search) runs that configuration."""
    kernel = allowing_tf32(kernel, settings)
    named, search = _named(kernel, settings), wanted(kernel, settings)
    if not (search or named) or not takes_params(device):
        return device.prepare(kernel, sizes)
    tuner = Tuner(device, kernel, sizes, budget(settings), named, settings and settings.flash_span)
    if not search:
        return tuner.configured()
    if len(tuner.candidates) < 2:
        return device.prepare(kernel, sizes)
    found = tuner.cached()
    if found is not None:
        return found
    return TuningPlan(tuner)


# ------------------------------------------------------------------------------ keys


def bucket(sizes: dict) -> tuple:
    """Each size rounded up to a power of two (see the module doc)."""
    return tuple(sorted((k, 1 << max(0, int(v) - 1).bit_length()) for k, v in sizes.items()))


def _driver(device) -> str:
    """The CUDA driver's version ("" elsewhere, or where the driver cannot tell)."""
    return getattr(device, "driver_version", "") if getattr(device, "backend", "") == "cuda" else ""


def fingerprint(device, kernel, target) -> tuple:
    """The device's name, arch, driver and the target and versions of its compiled kernels."""
    base = kcache.parts(name=device.name, backend=device.backend, arch=target.arch,
                        driver=_driver(device))
    try:
        # WebGPU keys its pipelines by its options, the others by sizes
        key = device.cache_key(kernel, device.options() if hasattr(device, "specialised") else {})
    except Exception:       # a device without compiled-kernel keys: name and arch alone
        return base
    return base + (key.target, key.versions)


def _schedule_view(device, kernel, sizes: dict) -> tuple:
    """(target, sizes) the device's schedules build `kernel` with at a launch of `sizes`:
    WebGPU builds one program for a pattern of sizes (`wgsl.schedule_targets`)."""
    from .compiler.codegen import schedule_view
    return schedule_view(device, kernel, sizes)


def _dtypes(kernel) -> tuple:
    return tuple((b.name, b.dtype) for b in list(kernel.inputs) + [kernel.output])


# ----------------------------------------------------------------------------- tuner


class Tuner:
    """The search of one kernel at one binding of its sizes on one device."""

    def __init__(self, device, kernel, sizes: dict, budget_s: float, named=None, span=None):
        self.device, self.kernel, self.budget_s = device, kernel, budget_s
        self.sizes = {d: int(sizes[d]) for d in kernel.dims if d in sizes}
        self.target, self.schedule_sizes = _schedule_view(device, kernel, self.sizes)
        self.schedule = schedules.chosen(kernel, self.target, self.schedule_sizes)
        # the library configuration to start from: the session's (checked), else the arch's
        attention = self.schedule is not None and self.schedule.name == "attention"
        self.named, self.span = (named if attention else None), span
        if self.named is not None:
            configs.validate_config(self.named, self.target, span,
                                    "flash_config " + self.named.describe())
        self.candidates = self._candidates() if self.schedule is not None else []
        self.winner: Choice | None = None       # once found: recorded or measured

    def _candidates(self) -> list:
        sched, args = self.schedule, (self.kernel, self.target, self.schedule_sizes)
        default = sched.default(*args)
        params = [default] + [p for p in sched.space(*args) if p != default]
        if sched.name == "attention":
            for config in (configs.hinted_config(*args),
                           self.named or configs.named_config(self.target)):
                p = config and configs.attention_params(config, self.target)
                if p and p not in params:
                    params.insert(1, p)
        return [Choice(sched.name, p) for p in params]

    def key(self) -> kcache.CacheKey:
        return kcache.CacheKey(
            "tuning", self.kernel.stable_hash(placed=False),
            params=kcache.parts(bucket=bucket(self.sizes), dtypes=_dtypes(self.kernel),
                                schedule=self.schedule.name),
            target=fingerprint(self.device, self.kernel, self.target))

    def configured(self) -> LaunchPlan:
        """The plan of the session's library configuration, without a search (the device's
        own choice where the kernel is not one the attention schedule takes)."""
        if self.named is None:
            return self.device.prepare(self.kernel, self.sizes)
        params = configs.attention_params(self.named, self.target)
        if params is None:
            raise ZynMLDeviceError(
                f"flash_config {self.named.describe()} runs {self.named.block_q} threads a "
                f"block; the target has at most {self.target.max_threads}", self.span)
        return _noted(self.device.prepare(self.kernel, self.sizes,
                                          params=Choice("attention", params)),
                      f"library configuration {self.named.describe()}")

    def cached(self) -> LaunchPlan | None:
        """The plan of the recorded winner, where a record of one of the candidates exists."""
        record = kcache.load_record(self.key())
        if record is None:
            return None
        choice = next((c for c in self.candidates
                       if dataclasses.asdict(c.params) == record.get("params")), None)
        if choice is None:
            return None
        STATS["from_cache"] += 1
        self.winner = choice
        return _noted(self.device.prepare(self.kernel, self.sizes, params=choice),
                      f"from the tuning cache: {_summary(choice, record)}")

    def tune(self, inputs: list, scalars: dict) -> LaunchPlan:
        """Measure the candidates on these inputs, record the fastest and return its plan."""
        STATS["searches"] += 1
        t0 = time.perf_counter()
        progress = _progress(self.kernel.name, self.device.id, len(self.candidates))
        share = self.budget_s / len(self.candidates)
        best = reference = None
        skipped, measured = [], 0
        for n, choice in enumerate(self.candidates):
            spent = time.perf_counter() - t0
            # the next candidate is expected to take as long as the mean one so far
            if n and spent + spent / n > self.budget_s:
                skipped += [(c.describe(), "not measured: the tuning budget was spent")
                            for c in self.candidates[n:]]
                break
            got = self._measure(choice, inputs, scalars, share, first=n == 0)
            if isinstance(got, str):
                skipped.append((choice.describe(), got))
                progress.update(n + 1, choice, None, best and best[1], got)
                continue
            plan, out, seconds = got
            if reference is None:
                reference = out
            elif not _close(out, reference, self.kernel.output.dtype):
                skipped.append((choice.describe(), "its result differs from the default's"))
                progress.update(n + 1, choice, seconds, best and best[1], "differs")
                continue
            measured += 1
            if best is None or seconds < best[1]:
                best = (choice, seconds, plan)
            progress.update(n + 1, choice, seconds, best[1])
        choice, seconds, plan = best
        self.winner = choice
        record = {"schedule": choice.schedule, "params": dataclasses.asdict(choice.params),
                  "ms": seconds * 1e3, "candidates": measured, "skipped": skipped,
                  "tune_s": time.perf_counter() - t0, "sizes": self.sizes}
        kcache.store_record(self.key(), record)
        progress.done(choice, seconds, record["tune_s"])
        return _noted(plan, f"tuned: {_summary(choice, record)}" + (
            f"; skipped {len(skipped)}" if skipped else ""))

    def _measure(self, choice: Choice, inputs, scalars, share: float, first: bool):
        """(plan, host output, median seconds), or why the candidate was skipped. The
        default (`first`) failing is the kernel failing: its error is raised."""
        try:
            STATS["candidates"] += 1
            plan = self.device.prepare(self.kernel, self.sizes, params=choice)
            out, _ = plan.launch(inputs, scalars)          # warm-up; its output is checked
            self.device.synchronize()
            host = np.asarray(self.device.to_host(out))
            return plan, host, self._time(plan, inputs, scalars, share)
        except Exception as err:
            if first:
                raise
            return "does not compile or run: " + (str(err).splitlines() or [type(err).__name__])[0]

    def _time(self, plan, inputs, scalars, share: float) -> float:
        """The median of up to REPS runs (at least one; no more once `share` is spent)."""
        times, start = [], time.perf_counter()
        while len(times) < REPS and (not times or time.perf_counter() - start < share):
            t0 = time.perf_counter()
            _, launch = plan.launch(inputs, scalars)
            self.device.synchronize()
            wall = time.perf_counter() - t0
            timed = launch.times.kernel if launch.times.source in (
                "gpu-events", "gpu-timestamps") else None
            times.append(wall if timed is None else timed)
        return statistics.median(times)


class TuningPlan(LaunchPlan):
    """A plan whose first launch runs the search (it needs the launch's inputs); every
    launch, that one included, then runs the winner's plan."""

    def __init__(self, tuner: Tuner):
        super().__init__(tuner.device, tuner.kernel, tuner.sizes)
        self.tuner = tuner
        self.plan: LaunchPlan | None = None
        self._lock = threading.Lock()       # threads launching at once search once

    def launch(self, inputs: list, scalars: dict, background: bool = False):
        if self.plan is None:
            with self._lock:
                if self.plan is None:
                    self.plan = self.tuner.tune(inputs, scalars)
        return self.plan.launch(inputs, scalars, background)


def _summary(choice: Choice, record: dict) -> str:
    return (f"{choice.describe()} ({record.get('ms', 0):.3g} ms, "
            f"{record.get('candidates', 0)} candidates, {record.get('tune_s', 0):.1f} s)")


def _noted(plan: LaunchPlan, note: str) -> LaunchPlan:
    """`plan` with its launches' geometry saying how its parameters were chosen."""
    geometry = getattr(plan, "geometry", None)
    if isinstance(geometry, dict):
        geometry["tuning"] = note
    else:
        plan.geometry = {"tuning": note}
    return plan


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> bool:
    tol = TOLERANCE.get(dtype)
    if got.shape != want.shape:
        return False
    if tol is None:
        return bool(np.array_equal(got, want))
    got, want = got.astype(np.float64), want.astype(np.float64)
    finite = want[np.isfinite(want)]
    scale = max(1.0, float(np.max(np.abs(finite)))) if finite.size else 1.0
    return bool(np.allclose(got, want, rtol=tol, atol=tol * scale, equal_nan=True))


# --------------------------------------------------------------------------- progress


def _progress(kernel: str, device: str, total: int):
    from .kernel.progress import _in_kernel
    if _in_kernel():
        try:
            from .widgets.tuning import TuningProgress
            return TuningProgress(kernel, device, total).show()
        except ImportError:         # no ipywidgets: the text bar
            pass
    return TextProgress(kernel, device, total)


def progress_text(kernel: str, device: str, done: int, total: int, choice, seconds,
                  best, why: str = "") -> str:
    """One line of progress: the bar, the candidate, its time (or why it was skipped) and
    the best time so far."""
    width = 20
    fill = width * done // max(total, 1)
    took = why or (f"{seconds * 1e3:.3g} ms" if seconds is not None else "")
    best_text = f" · best {best * 1e3:.3g} ms" if best is not None else ""
    return (f"tuning {kernel} on {device} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}: "
            f"{took}{best_text} · {choice.describe()}")


class TextProgress:
    """The search's progress as one line on stderr, rewritten in place."""

    def __init__(self, kernel: str, device: str, total: int, stream=None):
        self.kernel, self.device, self.total = kernel, device, total
        self.stream = stream or sys.stderr

    def update(self, done: int, choice, seconds, best, why: str = ""):
        text = progress_text(self.kernel, self.device, done, self.total, choice, seconds, best, why)
        self.stream.write(f"\r[zynbook] {text[:150]:<150}")
        self.stream.flush()

    def done(self, choice, seconds: float, tune_s: float):
        self.stream.write(f"\r[zynbook] tuned {self.kernel} on {self.device} in {tune_s:.1f} s: "
                          f"{choice.describe()} ({seconds * 1e3:.3g} ms){' ' * 20}\n")
        self.stream.flush()
