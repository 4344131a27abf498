"""CuPy views of torch CUDA tensors, made once per tensor.

Binding a torch tensor to a ZynML name happens on every run of a cell; a DLPack exchange
(`torch.Tensor.__dlpack__` then `cupy.from_dlpack`) costs tens of microseconds each time.
The view made the first time is kept while the tensor lives (a weak reference to it) and
given again while its storage pointer, shape, strides and dtype are those it was made for
(`t.data = ...`, `t.set_()` or a resize give a new view) and both torch and CuPy work on the
default stream: there the launches are ordered after torch's work by the stream itself;
on other streams the DLPack exchange is made again, since it is what makes CuPy's stream
wait for torch's."""
from __future__ import annotations

import sys
import weakref

_views: dict = {}       # id(tensor) -> (weak reference, layout, CuPy view)


def _layout(t) -> tuple:
    return (t.data_ptr(), t.shape, t.stride(), t.dtype)


def cupy_view(t, wrap=None):
    """A CuPy array sharing `t`'s memory (`t` a torch CUDA tensor); with `wrap`, `wrap` of
    that array, made once per view as the view is."""
    key = id(t)
    hit = _views.get(key)
    if hit is not None and hit[0]() is t and hit[1] == _layout(t) and _default_streams(t):
        if wrap is None:
            return hit[2]
        if hit[3] is None:
            hit[3] = wrap(hit[2])
        return hit[3]
    import cupy
    view = cupy.from_dlpack(t)
    wrapped = wrap(view) if wrap is not None else None
    try:
        ref = weakref.ref(t, lambda r, key=key: _forget(key, r))
    except TypeError:       # a tensor subclass without weak references: not kept
        return view if wrap is None else wrapped
    _views[key] = [ref, _layout(t), view, wrapped]
    return view if wrap is None else wrapped


def _forget(key, ref):
    hit = _views.get(key)
    if hit is not None and hit[0] is ref:
        del _views[key]


def _default_streams(t) -> bool:
    """Whether torch (on `t`'s device) and CuPy both queue work on the default stream."""
    modules = sys.modules
    cupy, torch = modules.get("cupy"), modules.get("torch")
    if cupy is not None and cupy.cuda.get_current_stream().ptr != 0:
        return False
    if torch is None or not hasattr(torch, "cuda"):
        return True
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)     # no Stream object made
    if raw is not None:
        return raw(t.get_device()) == 0
    return torch.cuda.current_stream(t.device).cuda_stream == 0
