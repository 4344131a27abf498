"""The compute-device interface as host builtins: `upload`, `matmul`, `adamw_step`, ... called
from ZynML run the operations of `zynbook.device(id)` (zynbook/nn/device.py), with its names
and arguments.

One table (`DEVICE_OPS`) says each builtin's parameters; one wrapper binds a call's arguments
to them and calls the device's method of the same name. The device is the one the call's
buffers live on; `upload`, `upload_u32`, `alloc` and `sync` take `device=` and otherwise use
the session's default device (`config { compute_device: ... }`).

A buffer of the wrong length is a shape error whose caret is under the argument that
disagrees (the device's message names both sizes). `elementwise(inputs, numel, f)` calls the
pipeline `f` with a list of one traced expression per input: its arithmetic, comparisons and
the math builtins on them build the body of one fused kernel (zynbook/nn/expr.py).
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import ZynMLError, ZynMLTypeError

# name: its parameters, in the order of the interface (compute-device-trait.rs)
DEVICE_OPS = {
    "upload": "data",
    "upload_u32": "data",
    "alloc": "len",
    "download": "buf",
    "elementwise": "inputs, numel, f",
    "matmul": "a, b, m, k, n",
    "softmax": "data, n_rows, row_len",
    "rms_norm": "data, weight, n_groups, dim, eps",
    "embedding": "weight, ids, seq_len, dim",
    "reduce_sum": "data, shape, axis",
    "causal_attention": "q, k, v, seq_len, n_heads, n_kv_heads, head_dim",
    "kv_attention": "q, k_cache, v_cache, cache_start, q_len, n_heads, n_kv_heads, head_dim",
    "transpose_2d": "buf, rows, cols",
    "softmax_backward": "softmax_out, grad_output, n_rows, row_len",
    "rms_norm_backward": "input, weight, grad_output, n_groups, dim, eps",
    "embedding_backward": "grad_output, ids, vocab_size, seq_len, dim",
    "causal_attention_backward": "grad_output, q, k, v, seq_len, n_heads, n_kv_heads, head_dim",
    "cross_entropy_forward_backward": "logits, targets, n_positions, vocab_size, pad_id",
    "sync": "",
    "copy_buffer": "src",
    "bias_add": "matrix, bias, numel, dim",
    "add_assign": "dst, src",
    "zero_buffer": "buf",
    "adamw_step": "param, grad, m, v, lr, beta1, beta2, eps, weight_decay, step_t",
}
# builtins that make buffers (or wait) without one to go by: they take device=
_PLACED = ("upload", "upload_u32", "alloc", "sync")

# math builtins that build a traced expression when given one (elementwise's function)
TRACED_FUNCTIONS = ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "gelu",
                    "abs", "sin", "cos", "floor", "ceil", "max", "min", "where")


def params_of(name: str) -> list:
    text = DEVICE_OPS[name]
    return [p.strip() for p in text.split(",")] if text else []


def usage(name: str) -> str:
    extra = ", device=" if name in _PLACED else ""
    return f"{name}({DEVICE_OPS[name]}{extra})" if DEVICE_OPS[name] or not extra else \
        f"{name}(device=)"


def _where(err: ZynMLError, place):
    # (position or keyword name, item of a list argument or None): the interpreter puts the
    # caret under that argument
    err.argument = place
    return err


def _bind(name, args, kwargs):
    params = params_of(name)
    allowed = params + (["device"] if name in _PLACED else [])
    for k in kwargs:
        if k not in allowed:
            raise ZynMLTypeError(f"{name}() has no parameter `{k}`; it is called as "
                                 f"{usage(name)}")
    if len(args) > len(params):
        raise ZynMLTypeError(f"{name}() takes {len(params)} argument(s), got {len(args)}: "
                             f"{usage(name)}")
    values, places = [], {}
    for i, p in enumerate(params):
        if i < len(args):
            if p in kwargs:
                raise ZynMLTypeError(f"{name}(): `{p}` is given twice")
            values.append(args[i])
            places[p] = i
        elif p in kwargs:
            values.append(kwargs[p])
            places[p] = p
        else:
            raise ZynMLTypeError(f"{name}() needs `{p}`: {usage(name)}")
    return values, places


def _host_values(value, what, name):
    from .builtins import _plain
    from .tensor import Tensor
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (list, tuple)):
        return np.asarray(_plain(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return np.asarray([value])
    raise ZynMLTypeError(f"{name}(): `{what}` takes a tensor or a list of numbers, not "
                         f"{_kind(value)}")


def _kind(value):
    from .builtins import _kind as kind
    return kind(value)


def _device_of(interp, name, values, kwargs):
    from ..nn.device import Buffer, device
    if "device" in kwargs:
        if not isinstance(kwargs["device"], str):
            raise ZynMLTypeError(f"{name}(): device= takes a device id like \"cpu\" or "
                                 "\"cuda:0\"")
        return device(kwargs["device"])
    for v in values:
        items = v if isinstance(v, list) else [v]
        for item in items:
            if isinstance(item, Buffer):
                return item.owner
    return device(interp.default_device)


_ARG_IN_MESSAGE = re.compile(r"^\w+\(\): `(\w+)(?:\[(\d+)\])?`")


def _run(interp, name, args, kwargs):
    values, places = _bind(name, args, kwargs)
    dev = _device_of(interp, name, values, kwargs)
    if name in ("upload", "upload_u32"):
        values = [_host_values(values[0], "data", name)]
    elif name == "elementwise":
        values = [_list(values[0], name), values[1], _traced(interp, values[2], name)]
    elif name == "reduce_sum" and isinstance(values[1], tuple):
        values[1] = list(values[1])
    try:
        result = getattr(dev, name)(*values)
    except ZynMLError as err:
        m = _ARG_IN_MESSAGE.match(err.message)
        if m and m.group(1) in places and getattr(err, "argument", None) is None:
            item = int(m.group(2)) if m.group(2) is not None else None
            _where(err, (places[m.group(1)], item))
        raise
    return _to_zynml(result)


def _list(value, name):
    if not isinstance(value, (list, tuple)):
        raise ZynMLTypeError(f"{name}(): `inputs` is a list of buffers, not {_kind(value)}")
    return list(value)


def _traced(interp, f, name):
    """The Python callable elementwise traces: the pipeline `f` called with the list of
    expressions."""
    from .values import Pipeline
    if not isinstance(f, Pipeline):
        raise ZynMLTypeError(f"{name}(): `f` is a pipeline of one parameter (the list of input "
                             f"expressions), not {_kind(f)}")
    if len(f.node.params) != 1:
        raise ZynMLTypeError(f"{name}(): pipeline {f.name} takes {len(f.node.params)} "
                             "parameters; elementwise calls it with one, the list of input "
                             "expressions (xs[0], xs[1], ...)")
    return lambda leaves: interp.call_pipeline(f, [list(leaves)], {}, None)


def _to_zynml(result):
    from .tensor import Tensor
    if isinstance(result, np.ndarray):
        return Tensor(result, "cpu")
    if isinstance(result, tuple):
        return tuple(_to_zynml(r) for r in result)
    return result


def make_builtin(name, host=None):
    """The builtin `name`; `host` is the host builtin of the same name (softmax), which a
    call with no buffer among its arguments runs."""
    def run(interp, args, kwargs):
        if host is not None and not _has_buffer(list(args) + list(kwargs.values())):
            return host(interp, args, kwargs)
        return _run(interp, name, args, kwargs)
    run.__doc__ = f"{usage(name)}: the compute-device interface's {name}"
    return run


def _has_buffer(values) -> bool:
    from ..nn.device import Buffer
    return any(isinstance(v, Buffer) for v in values)


def register(builtins: dict):
    for name in DEVICE_OPS:
        builtins[name] = make_builtin(name, builtins.get(name))


# ---------------------------------------------------------------- traced expressions

def is_traced(*values) -> bool:
    from ..nn.expr import Expr
    return any(isinstance(v, Expr) for v in values)


def traced_binary(op, a, b):
    from ..nn import expr as E
    fns = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
           "**": lambda: E.pow(a, b), "<": lambda: E.lift(a) < b, "<=": lambda: E.lift(a) <= b,
           ">": lambda: E.lift(a) > b, ">=": lambda: E.lift(a) >= b}
    if op not in fns:
        raise ZynMLTypeError(f"{op} is not available in an elementwise expression; it takes "
                             "+ - * / ** < <= > >= and where(cond, a, b)")
    return fns[op]()


def traced_call(name, args, kwargs):
    from ..nn import expr as E
    if kwargs:
        raise ZynMLTypeError(f"{name}() of an elementwise expression takes no named arguments")
    if name == "where":
        if len(args) != 3:
            raise ZynMLTypeError("where(cond, a, b) takes three arguments")
        return E.where(*args)
    if name in ("max", "min"):
        if len(args) < 2:
            raise ZynMLTypeError(f"{name}(a, b, ...) of expressions takes two or more arguments")
        out = E.lift(args[0])
        for v in args[1:]:
            out = (E.maximum if name == "max" else E.minimum)(out, v)
        return out
    if len(args) != 1:
        raise ZynMLTypeError(f"{name}(x) takes one argument")
    return getattr(E, name)(args[0])
