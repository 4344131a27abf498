"""`@device([...]) @parallel(data|model)`: one compute block split across several devices.

A kernel is split along one of its parallel loops: `data` takes the outermost one (the
batch), `model` the innermost loop of the outer parallel nest (the output features of a
matmul). Every input axis that loop indexes is cut into contiguous chunks, inputs it does
not index go whole to every device, each device runs the same kernel on its chunk (sizes
are solved again from the chunk's shapes), and the outputs are joined along the axis of
`out` that loop indexes. Kernels whose loop is used in any other way cannot be split and
say why.
"""
from __future__ import annotations

import concurrent.futures as cf

import numpy as np

from ..compiler import cir
from ..errors import ZynMLDeviceError


def split_plan(kernel: cir.Kernel, mode: str):
    """(loop variable, {input name: axis}, out axis) for splitting `kernel`, or raises."""
    nest = []
    body = kernel.body
    while len(body) == 1 and isinstance(body[0], cir.Loop) and body[0].parallel:
        nest.append(body[0])
        body = body[0].body
    if not nest:
        first = next((s for s in kernel.body if isinstance(s, cir.Loop) and s.parallel), None)
        nest = [first] if first is not None else []
    if not nest or kernel.kernel_type.kind == "reduce":
        raise ZynMLDeviceError("@parallel splits a kernel's outer parallel loop across "
                               "devices; this kernel has none to split (or is a reduction)")
    loop = nest[0] if mode == "data" else nest[-1]
    var = loop.var
    if not (isinstance(loop.start, cir.Const) and loop.start.value == 0 and
            isinstance(loop.step, cir.Const) and loop.step.value == 1):
        raise ZynMLDeviceError(f"@parallel({mode}) splits the loop over `{var}`, which must run "
                               "0..n in steps of 1")
    axes: dict = {}
    out_axis = None
    direct = 0
    for node in cir.walk(kernel.body):
        if not isinstance(node, (cir.Load, cir.Store)):
            continue
        for k, idx in enumerate(node.index):
            if not (isinstance(idx, cir.Var) and idx.name == var):
                continue
            direct += 1
            if node.buffer == "out":
                if out_axis not in (None, k):
                    raise _cannot(mode, var, "it indexes two axes of out")
                out_axis = k
            elif axes.setdefault(node.buffer, k) != k:
                raise _cannot(mode, var, f"it indexes two axes of `{node.buffer}`")
    # positions restart at 0 in every chunk, so any other use would change the meaning
    uses = sum(1 for n in cir.walk(kernel.body) if isinstance(n, cir.Var) and n.name == var)
    if uses != direct:
        raise _cannot(mode, var, "it is used other than as an index of its own")
    if out_axis is None:
        raise _cannot(mode, var, "it does not index out")
    return var, axes, out_axis


def _cannot(mode, var, why):
    return ZynMLDeviceError(f"cannot split this kernel for @parallel({mode}) along `{var}`: "
                            f"{why}; run it on one device")


def run_split(devices, lowered, inputs, given, mode, launch, solve):
    """Run `lowered` across `devices`; `launch(device, inputs, sizes)` runs one chunk and
    returns a host array; `solve(shapes, given)` solves the sizes of a chunk."""
    kernel = lowered.kernel
    var, axes, out_axis = split_plan(kernel, mode)
    names = [b.name for b in kernel.inputs]
    split_inputs = [(i, axes[n]) for i, n in enumerate(names) if n in axes]
    if not split_inputs:
        raise _cannot(mode, var, "it indexes no input")
    length = inputs[split_inputs[0][0]].shape[split_inputs[0][1]]
    bounds = np.linspace(0, length, len(devices) + 1).astype(int)
    chunks = []
    for k, dev in enumerate(devices):
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        if hi <= lo:
            continue
        part = list(inputs)
        for i, axis in split_inputs:
            host = inputs[i]
            sl = [slice(None)] * host.ndim
            sl[axis] = slice(lo, hi)
            part[i] = np.ascontiguousarray(host[tuple(sl)])
        shapes = {n: part[i].shape for i, n in enumerate(names)}
        chunk_given = {g: v for g, v in given.items() if g != _stop_name(kernel, var)}
        chunks.append((dev, part, solve(shapes, chunk_given)))
    with cf.ThreadPoolExecutor(max_workers=len(chunks)) as pool:
        outs = list(pool.map(lambda c: launch(*c), chunks))
    return np.concatenate(outs, axis=out_axis)


def _stop_name(kernel, var):
    for node in cir.walk(kernel.body):
        if isinstance(node, cir.Loop) and node.var == var and isinstance(node.stop, cir.Var):
            return node.stop.name
    return None
