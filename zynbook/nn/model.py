"""A tiny GPT-style language model trained with the device interface alone: token
embedding, pre-norm blocks of RMSNorm, grouped-query causal attention with RoPE and a SwiGLU
feed-forward network, a final RMSNorm and an output projection, cross-entropy, AdamW.

Every number is computed by ZynML kernels on the model's device; the host only orders the
launches, reads the loss and samples tokens. The backward pass is written out by hand
(`TinyGPT.backward`), each step the transpose of one forward step.

    model = TinyGPT(zynbook.device("auto"), GPTConfig(vocab=80))
    loss = model.train_step(ids, targets)         # forward, backward, AdamW
    text_ids = model.generate(prompt_ids, 50)     # with a KV cache
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import ZynMLShapeError, ZynMLTypeError
from . import expr as E


@dataclass
class GPTConfig:
    vocab: int
    dim: int = 48
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    ffn: int = 96
    max_seq: int = 64
    rope_base: float = 10000.0
    eps: float = 1e-5
    lr: float = 3e-3
    betas: tuple = (0.9, 0.95)
    adam_eps: float = 1e-8
    weight_decay: float = 0.01
    pad_id: int = 0
    seed: int = 0
    # bytes the forward pass may keep for the backward pass; None: the device's budget
    # (`dev.memory_budget`), and without one everything is kept. Layers past the budget keep
    # only their input and recompute the rest in the backward pass.
    memory_budget: int | None = None

    def __post_init__(self):
        # a wrong size is the caller's mistake, reported here rather than as a Python error
        # (or a model of no vocabulary) somewhere in the first step
        for name in ("vocab", "dim", "n_layers", "n_heads", "n_kv_heads", "ffn", "max_seq"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ZynMLTypeError(f"GPTConfig: `{name}` is a size (an int, at least 1), "
                                     f"not {v!r}")
        p = self.pad_id
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or not 0 <= p < 2 ** 32:
            raise ZynMLTypeError(f"GPTConfig: `pad_id` is a token id (an int from 0 to "
                                 f"2^32 - 1), not {p!r}")
        # the hyperparameters too, in the ranges the operations take them (a negative seed
        # was numpy's ValueError when the weights were drawn, a negative budget kept nothing)
        if not _whole(self.seed):
            raise ZynMLTypeError(f"GPTConfig: `seed` is an int at least 0, not {self.seed!r}")
        if self.memory_budget is not None and not _whole(self.memory_budget):
            raise ZynMLTypeError(f"GPTConfig: `memory_budget` is a number of bytes (an int at "
                                 f"least 0) or None, not {self.memory_budget!r}")
        for name in ("eps", "lr", "adam_eps", "weight_decay"):
            if not _real(getattr(self, name)) or not 0 <= getattr(self, name) < math.inf:
                raise ZynMLTypeError(f"GPTConfig: `{name}` is a finite number at least 0, not "
                                     f"{getattr(self, name)!r}")
        if not _real(self.rope_base) or not 0 < self.rope_base < math.inf:
            raise ZynMLTypeError(f"GPTConfig: `rope_base` is a finite number above 0, not "
                                 f"{self.rope_base!r}")
        b = self.betas
        if not isinstance(b, (tuple, list)) or len(b) != 2 or \
                not all(_real(v) and 0 <= v < 1 for v in b):
            raise ZynMLTypeError(f"GPTConfig: `betas` is a pair (beta1, beta2) of numbers in "
                                 f"[0, 1), not {b!r}")

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


LAYER_SHAPES = lambda c: {                                        # noqa: E731
    "attn_norm": (c.dim,), "wq": (c.dim, c.n_heads * c.head_dim),
    "wk": (c.dim, c.n_kv_heads * c.head_dim), "wv": (c.dim, c.n_kv_heads * c.head_dim),
    "wo": (c.n_heads * c.head_dim, c.dim), "mlp_norm": (c.dim,), "w1": (c.dim, c.ffn),
    "w3": (c.dim, c.ffn), "w2": (c.ffn, c.dim)}


def init_weights(config: GPTConfig) -> dict:
    """Initial weights as numpy arrays: {"embed", "final_norm", "lm_head", "layers": [...]}."""
    _need_config(config)
    c = config
    if c.dim % c.n_heads or c.head_dim % 2 or c.n_heads % c.n_kv_heads:
        raise ZynMLShapeError(f"GPTConfig: dim = {c.dim} must split into n_heads = {c.n_heads} "
                              f"heads of an even size, and n_kv_heads = {c.n_kv_heads} must "
                              "divide n_heads")
    rng = np.random.default_rng(c.seed)

    def w(*shape, scale=None):
        scale = 1.0 / math.sqrt(shape[0]) if scale is None else scale
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    layers = []
    for _ in range(c.n_layers):
        layer = {}
        for name, shape in LAYER_SHAPES(c).items():
            layer[name] = np.ones(shape, np.float32) if name.endswith("norm") else w(*shape)
        layer["wo"] *= 1.0 / math.sqrt(2 * c.n_layers)
        layer["w2"] *= 1.0 / math.sqrt(2 * c.n_layers)
        layers.append(layer)
    return {"embed": w(c.vocab, c.dim, scale=0.5), "final_norm": np.ones(c.dim, np.float32),
            "lm_head": w(c.dim, c.vocab), "layers": layers}


def _whole(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, np.integer)) and v >= 0


def _real(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float, np.integer, np.floating)) \
        and v == v


def _need_config(config):
    if not isinstance(config, GPTConfig):
        raise ZynMLTypeError(f"a model's config is a GPTConfig(vocab=...), not "
                             f"{type(config).__name__}")


def _weight_shapes(c: GPTConfig) -> dict:
    """name -> shape of every weight of a model of config `c` ("layers.0.wq", ...)."""
    shapes = {"embed": (c.vocab, c.dim), "final_norm": (c.dim,), "lm_head": (c.dim, c.vocab)}
    for i in range(c.n_layers):
        shapes.update({f"layers.{i}.{k}": v for k, v in LAYER_SHAPES(c).items()})
    return shapes


@dataclass
class _Cache:
    """What the forward pass keeps for the backward pass."""
    ids: object = None
    layers: list = field(default_factory=list)
    x_final: object = None
    h_final: object = None


class TinyGPT:
    """The model's weights as device buffers, with AdamW moments beside them."""

    def __init__(self, device, config: GPTConfig, weights: dict | None = None):
        from .device import Device
        if not isinstance(device, Device):
            raise ZynMLTypeError(f"TinyGPT takes a device interface, zynbook.device(id), not "
                                 f"{type(device).__name__}")
        _need_config(config)
        self.dev, self.config = device, config
        host = weights if weights is not None else init_weights(config)
        self.params = {}
        layers = host.get("layers") if hasattr(host, "get") else None
        if isinstance(layers, (list, tuple)) and len(layers) != config.n_layers:
            raise ZynMLShapeError(f"TinyGPT: the weights hold {len(layers)} layers, the config "
                                  f"n_layers = {config.n_layers}")
        # the weights the config says, each of its shape (a missing one was a KeyError)
        for name, shape in _weight_shapes(config).items():
            w = self._lookup(host, name)
            if w.shape != shape:
                raise ZynMLShapeError(f"TinyGPT: weight `{name}` is {list(w.shape)}, the config "
                                      f"makes it {list(shape)}")
            self.params[name] = device.upload(w)
        self.m = {k: device.alloc(len(b)) for k, b in self.params.items()}
        self.v = {k: device.alloc(len(b)) for k, b in self.params.items()}
        self.step_t = 0

    @staticmethod
    def _lookup(weights, name):
        node = weights
        try:
            for part in name.split("."):
                node = node[int(part)] if isinstance(node, (list, tuple)) else node[part]
            if hasattr(node, "__dlpack__") and not isinstance(node, np.ndarray):
                # a torch tensor of any dtype (bfloat16 too, which numpy cannot read)
                from ..runtime.tensor import to_tensor
                node = to_tensor(node).numpy()
            return np.asarray(node, np.float32)
        except (KeyError, IndexError, TypeError, ValueError, ZynMLTypeError):
            raise ZynMLTypeError(f"TinyGPT: the weights have no array `{name}` (weights are "
                                 "nested as init_weights gives them: embed, final_norm, "
                                 "lm_head, layers[i].wq, ...)") from None

    def p(self, name):
        return self.params[name]

    def weights(self) -> dict:
        """The weights on the host, nested as init_weights gives them (for save_weights)."""
        c = self.config
        out = {"embed": None, "final_norm": None, "lm_head": None,
               "layers": [dict() for _ in range(c.n_layers)]}
        shapes = {"embed": (c.vocab, c.dim), "final_norm": (c.dim,), "lm_head": (c.dim, c.vocab)}
        for name, buf in self.params.items():
            parts = name.split(".")
            if parts[0] == "layers":
                out["layers"][int(parts[1])][parts[2]] = \
                    buf.to_vec().reshape(LAYER_SHAPES(c)[parts[2]])
            else:
                out[name] = buf.to_vec().reshape(shapes[name])
        return out

    def parameter_count(self) -> int:
        return sum(len(b) for b in self.params.values())

    # ------------------------------------------------------------------ pieces
    def _linear(self, x, w, rows, n_in, n_out):
        return self.dev.matmul(x, w, rows, n_in, n_out)

    def _linear_backward(self, x, w, dy, rows, n_in, n_out, need_dx=True):
        """(dx = dy w^T, dw = x^T dy) of y = x w."""
        d = self.dev
        dw = d.matmul(d.transpose_2d(x, rows, n_in), dy, n_in, rows, n_out)
        dx = d.matmul(dy, d.transpose_2d(w, n_in, n_out), rows, n_out, n_in) if need_dx else None
        return dx, dw

    def _add(self, a, b, n):
        return self.dev.elementwise([a, b], n, lambda xs: xs[0] + xs[1])

    # ------------------------------------------------------------------ forward
    def forward(self, ids_buf, seq):
        """(logits [seq, vocab], what the backward pass needs) for one sequence of token ids."""
        c, d = self.config, self.dev
        D, H, KV, hd = c.dim, c.n_heads, c.n_kv_heads, c.head_dim
        cache = _Cache(ids=ids_buf)
        x = d.embedding(self.p("embed"), ids_buf, seq, D)
        full = self.layers_kept_whole(seq)
        for i in range(c.n_layers):
            x_out, acts = self._layer_forward(i, x, seq)
            cache.layers.append(acts if i < full else {"x": x})
            x = x_out
        self.last_stored_bytes = 4 * (sum(len(b) for acts in cache.layers for b in acts.values())
                                      + 2 * seq * D)
        hf = d.rms_norm(x, self.p("final_norm"), seq, D, c.eps)
        cache.x_final, cache.h_final = x, hf
        return self._linear(hf, self.p("lm_head"), seq, D, c.vocab), cache

    def _layer_forward(self, i, x, seq):
        """(the layer's output, the activations its backward pass reads)."""
        c, d = self.config, self.dev
        D, H, KV, hd = c.dim, c.n_heads, c.n_kv_heads, c.head_dim
        L = f"layers.{i}."
        h = d.rms_norm(x, self.p(L + "attn_norm"), seq, D, c.eps)
        q = d.rope(self._linear(h, self.p(L + "wq"), seq, D, H * hd), seq, H, hd,
                   base=c.rope_base)
        k = d.rope(self._linear(h, self.p(L + "wk"), seq, D, KV * hd), seq, KV, hd,
                   base=c.rope_base)
        v = self._linear(h, self.p(L + "wv"), seq, D, KV * hd)
        a = d.causal_attention(q, k, v, seq, H, KV, hd)
        x_mid = self._add(x, self._linear(a, self.p(L + "wo"), seq, H * hd, D), seq * D)
        h2 = d.rms_norm(x_mid, self.p(L + "mlp_norm"), seq, D, c.eps)
        g = self._linear(h2, self.p(L + "w1"), seq, D, c.ffn)
        u = self._linear(h2, self.p(L + "w3"), seq, D, c.ffn)
        s = d.elementwise([g, u], seq * c.ffn, lambda xs: E.silu(xs[0]) * xs[1])
        x_out = self._add(x_mid, self._linear(s, self.p(L + "w2"), seq, c.ffn, D), seq * D)
        return x_out, dict(x=x, h=h, q=q, k=k, v=v, a=a, x_mid=x_mid, h2=h2, g=g, u=u, s=s)

    @property
    def memory_budget(self):
        """The config's memory_budget, else the device's (`dev.memory_budget`, which
        `config { memory_budget: 64MB }` sets from ZynML); None: keep every activation."""
        if self.config.memory_budget is not None:
            return self.config.memory_budget
        return getattr(self.dev, "memory_budget", None)

    def activation_bytes(self, seq) -> tuple:
        """(bytes one layer keeps whole, bytes it keeps checkpointed) for `seq` positions."""
        c = self.config
        whole = seq * (4 * c.dim + 2 * c.n_heads * c.head_dim + 2 * c.n_kv_heads * c.head_dim
                       + 3 * c.ffn)
        return 4 * whole, 4 * seq * c.dim

    def layers_kept_whole(self, seq) -> int:
        """How many layers (the first ones) keep every activation within memory_budget; the
        others are recomputed from their input in the backward pass."""
        c = self.config
        budget = self.memory_budget
        if budget is None:
            return c.n_layers
        whole, ckpt = self.activation_bytes(seq)
        base = 4 * 2 * seq * c.dim                  # the final norm's input and output
        for k in range(c.n_layers, -1, -1):
            if base + k * whole + (c.n_layers - k) * ckpt <= budget:
                return k
        return 0

    # ------------------------------------------------------------------ backward
    def backward(self, dlogits, cache, seq) -> dict:
        """Gradients of every parameter (name -> buffer) from d loss / d logits."""
        c, d = self.config, self.dev
        D, H, KV, hd, F = c.dim, c.n_heads, c.n_kv_heads, c.head_dim, c.ffn
        grads = {}
        dh, grads["lm_head"] = self._linear_backward(cache.h_final, self.p("lm_head"), dlogits,
                                                     seq, D, c.vocab)
        dx, grads["final_norm"] = d.rms_norm_backward(cache.x_final, self.p("final_norm"), dh,
                                                      seq, D, c.eps)
        for i in reversed(range(c.n_layers)):
            L, a = f"layers.{i}.", cache.layers[i]
            if "h" not in a:                       # checkpointed: recompute from the input
                _, a = self._layer_forward(i, a["x"], seq)
            # x_out = x_mid + (silu(g) * u) w2
            ds, grads[L + "w2"] = self._linear_backward(a["s"], self.p(L + "w2"), dx, seq, F, D)
            dg = d.elementwise([ds, a["g"], a["u"]], seq * F, _silu_mul_grad_g)
            du = d.elementwise([ds, a["g"]], seq * F, lambda xs: xs[0] * E.silu(xs[1]))
            dh2_g, grads[L + "w1"] = self._linear_backward(a["h2"], self.p(L + "w1"), dg, seq, D, F)
            dh2_u, grads[L + "w3"] = self._linear_backward(a["h2"], self.p(L + "w3"), du, seq, D, F)
            dh2 = self._add(dh2_g, dh2_u, seq * D)
            dxm, grads[L + "mlp_norm"] = d.rms_norm_backward(a["x_mid"], self.p(L + "mlp_norm"),
                                                            dh2, seq, D, c.eps)
            dx = self._add(dx, dxm, seq * D)
            # x_mid = x + attention(rope(h wq), rope(h wk), h wv) wo
            da, grads[L + "wo"] = self._linear_backward(a["a"], self.p(L + "wo"), dx, seq, H * hd, D)
            dq, dk, dv = d.causal_attention_backward(da, a["q"], a["k"], a["v"], seq, H, KV, hd)
            dq = d.rope(dq, seq, H, hd, base=c.rope_base, inverse=True)
            dk = d.rope(dk, seq, KV, hd, base=c.rope_base, inverse=True)
            dhq, grads[L + "wq"] = self._linear_backward(a["h"], self.p(L + "wq"), dq, seq, D, H * hd)
            dhk, grads[L + "wk"] = self._linear_backward(a["h"], self.p(L + "wk"), dk, seq, D, KV * hd)
            dhv, grads[L + "wv"] = self._linear_backward(a["h"], self.p(L + "wv"), dv, seq, D, KV * hd)
            dhh = d.elementwise([dhq, dhk, dhv], seq * D, lambda xs: xs[0] + xs[1] + xs[2])
            dxa, grads[L + "attn_norm"] = d.rms_norm_backward(a["x"], self.p(L + "attn_norm"),
                                                             dhh, seq, D, c.eps)
            dx = self._add(dx, dxa, seq * D)
        grads["embed"] = d.embedding_backward(dx, cache.ids, c.vocab, seq, D)
        return grads

    # ------------------------------------------------------------------ training
    def _ids(self, ids, what):
        ids = _token_array(ids, what).reshape(-1)
        if ids.size == 0 or ids.size > self.config.max_seq:
            raise ZynMLShapeError(f"TinyGPT: {what} holds {ids.size} tokens; a sequence is 1 to "
                                  f"max_seq = {self.config.max_seq} tokens")
        # a target may be the pad id wherever it lies: cross-entropy leaves it out
        outside = (ids < 0) | (ids >= self.config.vocab)
        if what == "targets":
            outside &= ids != self.config.pad_id
        if outside.any():
            raise ZynMLShapeError(f"TinyGPT: a token id of {what} is outside the vocabulary of "
                                  f"{self.config.vocab}")
        return ids

    def loss_and_grads(self, ids, targets):
        """(mean cross-entropy over non-pad targets, {name: gradient buffer})."""
        ids, targets = self._ids(ids, "ids"), self._ids(targets, "targets")
        if ids.size != targets.size:
            raise ZynMLShapeError(f"TinyGPT: ids hold {ids.size} tokens, targets {targets.size}")
        d, seq = self.dev, ids.size
        logits, cache = self.forward(d.upload_u32(ids), seq)
        loss, dlogits = d.cross_entropy_forward_backward(
            logits, d.upload_u32(targets), seq, self.config.vocab, self.config.pad_id)
        return loss, self.backward(dlogits, cache, seq)

    def apply_grads(self, grads, lr: float | None = None):
        """One AdamW step on every parameter."""
        c = self.config
        self.step_t += 1
        for name, buf in self.params.items():
            self.dev.adamw_step(buf, grads[name], self.m[name], self.v[name],
                                c.lr if lr is None else lr, c.betas[0], c.betas[1], c.adam_eps,
                                0.0 if name.endswith("norm") else c.weight_decay, self.step_t)

    def grad_sum(self, batch_ids, batch_targets):
        """(the sum of the losses, {name: the sum of the gradients}) over the sequences of a
        [batch, seq] batch (zeros for an empty one: a device with no share of a batch)."""
        return run_interleaved([self.grad_steps(batch_ids, batch_targets)])[0]

    def grad_steps(self, batch_ids, batch_targets):
        """grad_sum one sequence at a time: a generator that yields after each sequence's
        launches and returns grad_sum's result, so that replicas on several devices can
        take turns on one host thread (nn/parallel.py)."""
        total, sums = 0.0, None
        for ids, targets in zip(batch_ids, batch_targets):
            loss, grads = self.loss_and_grads(ids, targets)
            total += loss
            if sums is None:
                sums = grads
            else:
                for name, g in grads.items():
                    self.dev.add_assign(sums[name], g)
            yield
        if sums is None:
            sums = {name: self.dev.alloc(len(buf)) for name, buf in self.params.items()}
        return total, sums

    def scale_grads(self, grads, factor: float):
        """Every gradient multiplied by `factor`, in place, on the device."""
        f = float(factor)
        for g in grads.values():
            if len(g):
                g.tensor = self.dev.elementwise([g], len(g), lambda xs: xs[0] * f).tensor

    def batch_loss_and_grads(self, batch_ids, batch_targets):
        """(the mean loss, the mean gradients) over the sequences of a [batch, seq] batch."""
        batch_ids = _token_array(batch_ids, "batch_ids")
        batch_targets = _token_array(batch_targets, "batch_targets")
        if batch_ids.ndim != 2 or batch_ids.shape != batch_targets.shape or not len(batch_ids):
            raise ZynMLShapeError(f"TinyGPT: a batch is [batch, seq] token ids with targets of "
                                  f"the same shape, not {list(batch_ids.shape)} and "
                                  f"{list(batch_targets.shape)}")
        total, sums = self.grad_sum(batch_ids, batch_targets)
        self.scale_grads(sums, 1.0 / len(batch_ids))
        return total / len(batch_ids), sums

    def train_batch(self, batch_ids, batch_targets, lr: float | None = None) -> float:
        """One AdamW step on the mean gradient of a [batch, seq] batch; its mean loss."""
        loss, grads = self.batch_loss_and_grads(batch_ids, batch_targets)
        self.apply_grads(grads, lr)
        return loss

    def train_step(self, ids, targets, lr: float | None = None) -> float:
        loss, grads = self.loss_and_grads(ids, targets)
        self.apply_grads(grads, lr)
        return loss

    def loss(self, ids, targets) -> float:
        """The loss alone (no update)."""
        ids, targets = self._ids(ids, "ids"), self._ids(targets, "targets")
        d, seq = self.dev, ids.size
        logits, _ = self.forward(d.upload_u32(ids), seq)
        return d.cross_entropy_forward_backward(logits, d.upload_u32(targets), seq,
                                                self.config.vocab, self.config.pad_id)[0]

    # ------------------------------------------------------------------ generation
    def generate(self, prompt, n_new: int, temperature: float = 0.8, seed: int = 0,
                 top_k: int | None = None) -> list:
        """`prompt` followed by `n_new` sampled tokens: the prompt is prefilled once, then each
        new token attends over the KV cache (kv_attention_fixed over caches of max_seq rows;
        write_rows puts each position's keys, turned by RoPE once, and values in place)."""
        c, d = self.config, self.dev
        D, H, KV, hd = c.dim, c.n_heads, c.n_kv_heads, c.head_dim
        prompt = [int(t) for t in self._ids(prompt, "the prompt")]
        if isinstance(n_new, bool) or not isinstance(n_new, (int, np.integer)) or n_new < 0:
            raise ZynMLTypeError(f"TinyGPT.generate(): `n_new` is a number of tokens (an int, "
                                 f"at least 0), not {n_new!r}")
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(
                top_k, (int, np.integer)) or not 1 <= top_k <= c.vocab):
            raise ZynMLTypeError(f"TinyGPT.generate(): `top_k` is an int from 1 to vocab = "
                                 f"{c.vocab}, not {top_k!r}")
        if len(prompt) + n_new > c.max_seq:
            raise ZynMLShapeError(f"TinyGPT.generate(): {len(prompt)} + {n_new} tokens are more "
                                  f"than max_seq = {c.max_seq}")
        if not _real(temperature) or temperature == math.inf:
            raise ZynMLTypeError(f"TinyGPT.generate(): `temperature` is a finite number (at "
                                 f"most 0: the likeliest token), not {temperature!r}")
        if not _whole(seed):
            raise ZynMLTypeError(f"TinyGPT.generate(): `seed` is an int at least 0, not "
                                 f"{seed!r}")
        rng = np.random.default_rng(seed)
        # caches of max_seq rows: the position is a scalar argument of the kernels, so every
        # decoded token launches kernels already compiled
        cap = c.max_seq
        caches = [[None, None] for _ in range(c.n_layers)]
        tokens, start, new = list(prompt), 0, prompt
        for _ in range(n_new):
            q_len = len(new)
            x = d.embedding(self.p("embed"), d.upload_u32(new), q_len, D)
            for i in range(c.n_layers):
                L = f"layers.{i}."
                h = d.rms_norm(x, self.p(L + "attn_norm"), q_len, D, c.eps)
                q = d.rope(self._linear(h, self.p(L + "wq"), q_len, D, H * hd), q_len, H, hd,
                           pos0=start, base=c.rope_base)
                k = d.rope(self._linear(h, self.p(L + "wk"), q_len, D, KV * hd), q_len, KV, hd,
                           pos0=start, base=c.rope_base)
                v = self._linear(h, self.p(L + "wv"), q_len, D, KV * hd)
                kc, vc = caches[i]
                if kc is None:
                    kc, vc = d.alloc(cap * KV * hd), d.alloc(cap * KV * hd)
                kc = d.write_rows(kc, k, start, cap, q_len, KV * hd)
                vc = d.write_rows(vc, v, start, cap, q_len, KV * hd)
                caches[i] = [kc, vc]
                a = d.kv_attention_fixed(q, kc, vc, start, q_len, cap, H, KV, hd)
                x = self._add(x, self._linear(a, self.p(L + "wo"), q_len, H * hd, D), q_len * D)
                h2 = d.rms_norm(x, self.p(L + "mlp_norm"), q_len, D, c.eps)
                g = self._linear(h2, self.p(L + "w1"), q_len, D, c.ffn)
                u = self._linear(h2, self.p(L + "w3"), q_len, D, c.ffn)
                s = d.elementwise([g, u], q_len * c.ffn, lambda xs: E.silu(xs[0]) * xs[1])
                x = self._add(x, self._linear(s, self.p(L + "w2"), q_len, c.ffn, D), q_len * D)
            hf = d.rms_norm(x, self.p("final_norm"), q_len, D, c.eps)
            logits = d.download(self._linear(hf, self.p("lm_head"), q_len, D, c.vocab))
            last = logits.reshape(q_len, c.vocab)[-1].astype(np.float64)
            if temperature <= 0:
                nxt = int(np.argmax(last))
            else:
                # shifted by the largest logit before the division: a temperature so small
                # (1e-310) that logit / temperature overflows made inf - inf, NaN weights
                with np.errstate(over="ignore"):
                    z = (last - last.max()) / temperature
                if top_k:
                    z[z < np.sort(z)[-top_k]] = -np.inf
                p = np.exp(z)
                nxt = int(rng.choice(c.vocab, p=p / p.sum()))
            start += q_len
            tokens.append(nxt)
            new = [nxt]
        return tokens


def _token_array(ids, what) -> np.ndarray:
    """`ids` as an integer array; strings, floats and ragged lists are a type error."""
    try:
        arr = np.asarray(ids)
    except (ValueError, TypeError):
        arr = None
    if arr is not None and arr.size == 0:      # [] is numpy's float64: no ids, not floats
        arr = arr.astype(np.int64)
    if arr is None or arr.dtype.kind not in "iu":
        raise ZynMLTypeError(f"TinyGPT: {what} are integer token ids (an array or a "
                             "rectangular list)")
    return arr


def run_interleaved(steps: list) -> list:
    """Drive generators (grad_steps) one step each in turn until all have returned; their
    return values, in order."""
    results = [None] * len(steps)
    live = list(range(len(steps)))
    while live:
        for k in list(live):
            try:
                next(steps[k])
            except StopIteration as done:
                results[k] = done.value
                live.remove(k)
    return results


def _silu_mul_grad_g(xs):
    """d/dg of silu(g) * u, times the upstream ds: ds * u * sig(g) (1 + g (1 - sig(g)))."""
    ds, g, u = xs
    sg = E.sigmoid(g)
    return ds * u * sg * (1.0 + g * (1.0 - sg))


def config_dict(config: GPTConfig) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(config).items()}


class CharTokenizer:
    """Characters <-> ids; id 0 is the pad, the other ids the characters of a text."""

    def __init__(self, text: str):
        if not isinstance(text, str) or not text:
            raise ZynMLTypeError("CharTokenizer takes a non-empty text")
        self.chars = ["<pad>"] + sorted(set(text))
        self.index = {ch: i for i, ch in enumerate(self.chars)}

    @property
    def vocab(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        return np.array([self.index[ch] for ch in text if ch in self.index], np.uint32)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids if int(i) != 0)
