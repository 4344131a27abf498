"""One renderer per language: CIR -> source text. `available_sources` asks each one."""
from __future__ import annotations

import importlib


def _cuda(mod, kernel, sizes):
    if sizes is None:
        raise ValueError("CUDA source has its sizes compiled in: run the kernel first")
    return mod.render_cuda(kernel, sizes).source


# language -> (module, function giving the source text)
RENDERERS = {"python": ("python", lambda mod, kernel, sizes: mod.render(kernel)),
             "cuda": ("cuda", _cuda),
             "wgsl": ("wgsl", lambda mod, kernel, sizes: mod.render_source(kernel, sizes=sizes)),
             "msl": ("msl", lambda mod, kernel, sizes: mod.render(kernel, sizes)),
             "c": ("c", lambda mod, kernel, sizes: mod.render(kernel, sizes))}


def render_text(language: str, kernel, sizes: dict | None = None) -> str:
    """The source text of `kernel` in `language`."""
    module, fn = RENDERERS[language]
    return fn(importlib.import_module(f"{__name__}.{module}"), kernel, sizes)


def available_sources(kernel, device=None, sizes=None) -> dict:
    """{language: generated source text} for `kernel` from every renderer that can render
    it (one that cannot says why instead). The device's own view comes first (it may add
    e.g. PTX)."""
    out: dict = {}
    if device is not None:
        try:
            try:
                got = device.generated_source(kernel, sizes=sizes)
            except TypeError:
                got = device.generated_source(kernel)
            out.update({k: v if isinstance(v, str) else getattr(v, "source", str(v))
                        for k, v in got.items()})
        except Exception as err:        # the inspector shows why instead of failing
            out[device.backend] = f"// not available: {err}"
    for language in RENDERERS:
        if language in out:
            continue
        try:
            out[language] = render_text(language, kernel, sizes)
        except ImportError:
            continue
        except Exception as err:
            out[language] = f"// not available: {err}"
    return out


def device_target(device=None):
    """The compiler's Target of a device (the CUDA target, sm_90, for the CPU reference,
    which runs no launch IR: the view a GPU would get)."""
    from ..targets import cpu_target, cuda_target, metal_target, webgpu_target
    backend = getattr(device, "backend", "")
    if backend == "cuda":
        return cuda_target(tuple(getattr(device, "cc", (9, 0))), getattr(device, "multiprocessors", 0),
                           getattr(device, "bulk_copy", True))
    if getattr(device, "id", "").startswith("cpu:native"):
        return cpu_target()
    if backend in ("webgpu", "vulkan", "wgpu"):
        return webgpu_target(getattr(device, "features", ()))
    if backend == "metal":
        return metal_target()
    return cuda_target()


def schedule_view(device, kernel, sizes: dict) -> tuple:
    """(target, sizes) the device's schedules build `kernel` with at a launch of `sizes`:
    a WebGPU adapter (on any backend: Vulkan, Metal, DX12, OpenGL) builds one program for
    a pattern of sizes on its own target (`wgsl.schedule_targets`), the others for
    `device_target`."""
    from .. import schedules
    specialised = getattr(device, "specialised", None)
    if specialised is None:
        return device_target(device), sizes
    from . import wgsl
    views = wgsl.schedule_targets(kernel, specialised(kernel, sizes))
    return next(((t, s) for t, s in views if schedules.chosen(kernel, t, s)), views[0])


def launch_ir_text(kernel, device=None, sizes=None) -> str:
    """The launch IR the schedules build for `kernel` on `device`'s target, as text (or why
    there is none: sizes not known yet, or no schedule of the new form takes the kernel).
    `device=None` gives the CUDA target's (the view a GPU would get); the reference CPU,
    which interprets the CIR, says it has none rather than show another device's."""
    from .. import schedules
    from ..launch.text import format_program
    if getattr(device, "backend", "") == "cpu":
        return (f"// {device.id} (the reference executor) runs no launch IR: it interprets "
                f"the CIR after the passes")
    if sizes is None and kernel.dims:
        return "// the launch IR is built for the sizes of a launch: run the kernel first"
    sizes = dict(sizes or {})
    try:
        # (an OpenGL or DX12 adapter showed the CUDA target's program)
        target, sizes = schedule_view(device, kernel, sizes)
    except Exception as err:          # the inspector shows why instead of failing
        return f"// not available: {err}"
    try:
        prog = schedules.build(kernel, target, sizes)
    except Exception as err:          # the inspector shows why instead of failing
        return f"// not available: {err}"
    head = f"// target: {target.name} {target.arch}".rstrip()
    if prog is None:
        return (f"{head}\n// no schedule of compiler/schedules/ takes this kernel yet; its "
                f"renderer decides alone\n// " + schedules.why_none(kernel, target, sizes))
    return f"{head}\n{format_program(prog)}"
