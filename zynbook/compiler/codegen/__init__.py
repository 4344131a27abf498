"""One renderer per language: CIR -> source text. `available_sources` asks each one."""
from __future__ import annotations

import importlib


def available_sources(kernel, device=None, sizes=None) -> dict:
    """{language: generated source} for `kernel` from every renderer that can render it
    (a renderer that cannot shows why instead). The device's own view comes first."""
    out: dict = {}
    if device is not None:
        try:
            try:
                out.update(device.generated_source(kernel, sizes=sizes))
            except TypeError:
                out.update(device.generated_source(kernel))
        except Exception as err:        # the inspector shows why instead of failing
            out[device.backend] = f"// not available: {err}"
    for lang, module, fn in (("python", "python", "render"), ("cuda", "cuda", "render"),
                             ("wgsl", "wgsl", "render"), ("msl", "msl", "render")):
        if lang in out:
            continue
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ImportError:
            continue
        try:
            out[lang] = getattr(mod, fn)(kernel)
        except Exception as err:
            out[lang] = f"// not available: {err}"
    return out
