"""CuPy views of torch CUDA tensors, made once per tensor.

Binding a torch tensor to a ZynML name happens on every run of a cell; a DLPack exchange
(`torch.Tensor.__dlpack__` then `cupy.from_dlpack`) costs tens of microseconds each time.
The view made the first time is kept while the tensor lives (a weak reference to it) and
given again while its storage pointer, shape, strides and dtype are those it was made for
(`t.data = ...`, `t.set_()` or a resize give a new view) and torch and CuPy work on one
stream: there the launches are ordered after torch's work by the stream itself; on two
streams the DLPack exchange is made again, since it is what makes CuPy's stream wait for
torch's.

A call made inside `with torch.cuda.stream(s):` runs on `s` (`torch_stream`): its copies,
launches and graphs are queued after the caller's torch work on `s`, and the caller's later
work on `s` after them, as a torch op's would be."""
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
    if hit is not None and hit[0]() is t and hit[1] == _layout(t) and _one_stream(t):
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


def _one_stream(t) -> bool:
    """Whether torch (on `t`'s device) and CuPy queue work on the same stream."""
    modules = sys.modules
    cupy, torch = modules.get("cupy"), modules.get("torch")
    ours = cupy.cuda.get_current_stream().ptr if cupy is not None else 0
    if torch is None or not hasattr(torch, "cuda"):
        return ours == 0
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)     # no Stream object made
    if raw is not None:
        return raw(t.get_device()) == ours
    return torch.cuda.current_stream(t.device).cuda_stream == ours


_external: dict = {}        # (stream pointer, device) -> CuPy's ExternalStream of it


def torch_stream():
    """The stream a call (a cell, a pipeline called from Python) runs on where the caller
    made a torch stream current on CuPy's current device (`with torch.cuda.stream(s):`)
    and CuPy's current stream there is the default one: `s`, as a CuPy stream, so that the
    call's work is ordered after the caller's on `s` and the caller's later work after it.
    None otherwise (CuPy's current stream is used: torch's is the default one too, or the
    caller chose CuPy's)."""
    modules = sys.modules
    torch, cupy = modules.get("torch"), modules.get("cupy")
    if torch is None or cupy is None or not hasattr(torch, "cuda") or \
            not torch.cuda.is_initialized():
        return None
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return None
    device = cupy.cuda.runtime.getDevice()
    ptr = raw(device)
    if ptr == 0 or cupy.cuda.get_current_stream().ptr != 0:
        return None
    stream = _external.get((ptr, device))
    if stream is None:
        stream = _external[(ptr, device)] = cupy.cuda.ExternalStream(ptr, device)
    return stream
