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
        try:
            data = np.asarray(_plain(value))
        except ValueError:
            data = None             # ragged
        if data is None or data.dtype.kind not in "biuf":
            raise ZynMLTypeError(f"{name}(): `{what}` takes a tensor or a (rectangular) list "
                                 "of numbers")
        return data
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return np.asarray([value])
    raise ZynMLTypeError(f"{name}(): `{what}` takes a tensor or a list of numbers, not "
                         f"{_kind(value)}")


def _kind(value):
    from .builtins import _kind as kind
    return kind(value)


def _named_device(device_id):
    """The interface of the device `device=` names; its errors under that argument."""
    from ..nn.device import device
    try:
        return device(device_id)
    except ZynMLError as err:
        raise _where(err, ("device", None))


def _device_of(interp, name, values, kwargs):
    from ..nn.device import Buffer, device
    if "device" in kwargs:
        if not isinstance(kwargs["device"], str):
            raise _where(ZynMLTypeError(f"{name}(): device= takes a device id like \"cpu\" or "
                                        "\"cuda:0\""), ("device", None))
        return _named_device(kwargs["device"])
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
    try:
        if name in ("upload", "upload_u32"):
            values = [_host_values(values[0], "data", name)]
        elif name == "elementwise":
            values = [_list(values[0], name), values[1], _traced(interp, values[2], name)]
        elif name == "reduce_sum" and isinstance(values[1], tuple):
            values[1] = list(values[1])
        result = getattr(dev, name)(*values)
    except ZynMLError as err:
        if err.inner_program is not None:      # raised by the operation's own kernels
            raise err.at_call(name) from None
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
    builtins.update(_MORE)


_MORE: dict = {}


def _builtin_named(name):
    def put(fn):
        _MORE[name] = fn
        return fn
    return put


def set_memory_budget(interp, value, span):
    """`config { memory_budget: 64MB }`: the budget of the device interface on the session's
    device (a size in bytes; `inf` for none), which training steps of models built on it keep
    their activations within, recomputing the rest in the backward pass."""
    import math
    from ..nn.device import device
    from .builtins import as_number
    value = as_number(value)        # (a 0-d tensor, np.array(2**20), is its number)
    if isinstance(value, float) and math.isinf(value) and value > 0:
        value = None
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ZynMLTypeError("memory_budget takes a size in bytes like 64MB (inf: no budget)",
                             span)
    device(interp.default_device).memory_budget = value


@_builtin_named("memory_stats")
def _memory_stats(interp, args, kwargs):
    from ..nn.device import device
    from .values import Record
    for k in kwargs:
        if k not in ("device", "reset"):
            raise ZynMLTypeError(f"memory_stats() has no parameter `{k}`; it is called as "
                                 "memory_stats(device=, reset=false)")
    if args:
        raise ZynMLTypeError("memory_stats() takes named arguments: memory_stats(device=, "
                             "reset=false)")
    dev = _named_device(kwargs["device"]) if "device" in kwargs else \
        device(interp.default_device)
    reset = kwargs.get("reset", False)
    if not isinstance(reset, bool):     # `reset=3` was taken for true
        raise ZynMLTypeError(f"memory_stats(): reset= takes true or false, not {reset!r}")
    stats = dev.memory_stats()
    if reset:
        dev.reset_peak_memory()
    return Record(dict(stats, budget_bytes=dev.memory_budget))


# ---------------------------------------------------------------- static checks
# What the checker verifies before anything runs, where the sizes are known (literals, sizes
# it follows): each buffer argument's length as a formula of the call's sizes, and the length
# of what the builtin returns (a tuple for several buffers; None: not a buffer).
LENGTHS = {
    "elementwise": ({"inputs": "numel"}, "numel"),
    "matmul": ({"a": "m * k", "b": "k * n"}, "m * n"),
    "softmax": ({"data": "n_rows * row_len"}, "n_rows * row_len"),
    "rms_norm": ({"data": "n_groups * dim", "weight": "dim"}, "n_groups * dim"),
    "embedding": ({"ids": "seq_len"}, "seq_len * dim"),
    "causal_attention": ({"q": "seq_len * n_heads * head_dim",
                          "k": "seq_len * n_kv_heads * head_dim",
                          "v": "seq_len * n_kv_heads * head_dim"}, "seq_len * n_heads * head_dim"),
    "kv_attention": ({"q": "q_len * n_heads * head_dim",
                      "k_cache": "(cache_start + q_len) * n_kv_heads * head_dim",
                      "v_cache": "(cache_start + q_len) * n_kv_heads * head_dim"},
                     "q_len * n_heads * head_dim"),
    "transpose_2d": ({"buf": "rows * cols"}, "rows * cols"),
    "softmax_backward": ({"softmax_out": "n_rows * row_len", "grad_output": "n_rows * row_len"},
                         "n_rows * row_len"),
    "rms_norm_backward": ({"input": "n_groups * dim", "weight": "dim",
                           "grad_output": "n_groups * dim"}, ("n_groups * dim", "dim")),
    "embedding_backward": ({"grad_output": "seq_len * dim", "ids": "seq_len"},
                           "vocab_size * dim"),
    "causal_attention_backward": ({"grad_output": "seq_len * n_heads * head_dim",
                                   "q": "seq_len * n_heads * head_dim",
                                   "k": "seq_len * n_kv_heads * head_dim",
                                   "v": "seq_len * n_kv_heads * head_dim"},
                                  ("seq_len * n_heads * head_dim",
                                   "seq_len * n_kv_heads * head_dim",
                                   "seq_len * n_kv_heads * head_dim")),
    "cross_entropy_forward_backward": ({"logits": "n_positions * vocab_size",
                                        "targets": "n_positions"},
                                       (None, "n_positions * vocab_size")),
    "copy_buffer": ({}, "len(src)"),
    "bias_add": ({"matrix": "numel", "bias": "dim"}, "numel"),
    "add_assign": ({"src": "len(dst)"}, None),
    "adamw_step": ({"grad": "len(param)", "m": "len(param)", "v": "len(param)"}, None),
}


class BufferShape:
    """What the checker knows of a buffer: its dtype and length (None: not known)."""

    def __init__(self, dtype="f32", length=None):
        self.dtype, self.length = dtype, length

    def __repr__(self):
        return f"BufferShape({self.dtype}, {self.length})"


class _NotKnown(Exception):
    pass


def check_call(name, args, kwargs, node):
    """The checker's abstract value of a call of builtin `name` whose arguments' abstract
    values are `args` and `kwargs`; a ZynMLShapeError (under the argument) where known lengths
    disagree."""
    from ..compiler.check import UNKNOWN, TensorShape
    from ..errors import ZynMLShapeError
    if name == "softmax" and not (args and isinstance(args[0], BufferShape)):
        return UNKNOWN                       # the host's softmax
    try:
        values, places = _bind(name, args, kwargs)
    except ZynMLError:
        return UNKNOWN                       # arity mistakes are reported when it runs
    env = dict(zip(params_of(name), values))
    if name in ("upload", "upload_u32"):
        data, n = values[0], None
        if isinstance(data, TensorShape) and data.shape and all(d is not None for d in data.shape):
            n = int(np.prod(data.shape))
        elif isinstance(data, list) and all(not isinstance(x, (list, tuple)) for x in data):
            n = len(data)
        return BufferShape("u32" if name == "upload_u32" else "f32", n)
    if name == "alloc":
        v = values[0]
        return BufferShape("f32", v if isinstance(v, int) and not isinstance(v, bool) else None)
    if name == "download":
        b = values[0]
        return TensorShape(b.dtype, (b.length,)) if isinstance(b, BufferShape) else \
            TensorShape("f32", (None,))
    if name not in LENGTHS:
        return UNKNOWN

    def length_of(v):
        if isinstance(v, BufferShape) and v.length is not None:
            return v.length
        raise _NotKnown

    known = {k: v for k, v in env.items() if isinstance(v, BufferShape) or
             isinstance(v, int) and not isinstance(v, bool)}

    def evaluate(formula):
        try:
            return eval(formula, {"__builtins__": {}, "len": length_of}, known)   # noqa: S307
        except (_NotKnown, NameError, TypeError):
            # TypeError: a buffer given for a size (the call's own check says so when it runs)
            return None

    needs, result = LENGTHS[name]
    for param, formula in needs.items():
        want = evaluate(formula)
        if want is None:
            continue
        value = env[param]
        items = list(enumerate(value)) if param == "inputs" and isinstance(value, list) else \
            [(None, value)]
        for item, b in items:
            if not isinstance(b, BufferShape) or b.length is None or b.length == int(want):
                continue
            what = param if item is None else f"{param}[{item}]"
            sizes = [str(known[n]) for n in re.findall(r"[a-z_]+", formula)
                     if n in known and not isinstance(known[n], BufferShape)]
            shown = formula if "(" in formula or len(sizes) < 2 else \
                f"{formula} = {' * '.join(sizes)}"
            err = ZynMLShapeError(f"{name}(): `{what}` has {b.length} elements but {shown} = "
                                  f"{int(want)}")
            err.span = argument_span(node, len(args), (places[param], item))
            raise err

    def result_of(f):
        if f is None:
            return 1.0                      # a number (the loss)
        n = evaluate(f)
        return BufferShape("f32", None if n is None else int(n))
    if result is None:
        return UNKNOWN
    if isinstance(result, tuple):
        return tuple(result_of(f) for f in result)
    return result_of(result)


def argument_span(node, n_args: int, place):
    """The span of the argument an error is about: `place` is (position or keyword name, item
    of a list literal or None); the call's span where it cannot tell."""
    from ..compiler import ast as A
    if place is None or not isinstance(node, A.Call):
        return node.span
    where, item = place
    arg = None
    if isinstance(where, int):
        k = where - (n_args - len(node.args))      # arguments piped in come first
        if 0 <= k < len(node.args):
            arg = node.args[k]
    else:
        arg = next((kw.value for kw in node.kwargs if kw.name == where), None)
    if arg is None:
        return node.span
    if item is not None and isinstance(arg, A.ListLit) and item < len(arg.items):
        arg = arg.items[item]
    return arg.span


# ---------------------------------------------------------------- traced expressions

def is_traced(*values) -> bool:
    from ..nn.expr import Expr
    return any(isinstance(v, Expr) for v in values)


def traced_binary(op, a, b):
    from ..nn import expr as E
    fns = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
           "**": lambda: E.pow(a, b), "<": lambda: E.lift(a) < b, "<=": lambda: E.lift(a) <= b,
           ">": lambda: E.lift(a) > b, ">=": lambda: E.lift(a) >= b,
           "==": lambda: E.equal(a, b), "!=": lambda: E.not_equal(a, b)}
    if op not in fns:
        raise ZynMLTypeError(f"{op} is not available in an elementwise expression; it takes "
                             "+ - * / ** < <= > >= == != and where(cond, a, b)")
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
