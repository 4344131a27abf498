"""One renderer per language: CIR -> source text. `available_sources` asks each one."""
from __future__ import annotations

import importlib


def _python(mod, kernel, sizes):
    return mod.render(kernel)


def _cuda(mod, kernel, sizes):
    if sizes is None:
        raise ValueError("CUDA source has its sizes compiled in: run the kernel first")
    return mod.render_cuda(kernel, sizes).source


def _wgsl(mod, kernel, sizes):
    return mod.render_source(kernel)


def _msl(mod, kernel, sizes):
    return mod.render(kernel, sizes)


def _c(mod, kernel, sizes):
    return mod.render(kernel, sizes)


# language -> (module, function giving the source text)
RENDERERS = {"python": ("python", _python), "cuda": ("cuda", _cuda), "wgsl": ("wgsl", _wgsl),
             "msl": ("msl", _msl), "c": ("c", _c)}


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
