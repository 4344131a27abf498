"""The emulator's model of mbarriers and the tensor memory accelerator's box copies (PTX
`mbarrier.*` and `cp.async.bulk.tensor`, sm_90), from the PTX ISA's description rather than
from the schedule that uses them.

* An mbarrier counts a phase's pending arrivals (from `init`'s count) and its transaction
  bytes: `arrive` takes one arrival and, with expect_tx, adds the bytes it expects; a box
  copy's bytes are taken off as it lands. The phase completes when both reach 0; the next
  starts with the full count. `try_wait.parity(P)` passes once the phase of parity P
  completed: on a fresh mbarrier (phase 0 running) parity 1 passes at once.
* A box copy reads its elements when issued (zeros for coordinates outside the tensor) and
  lands them when the phase that counts its bytes completes, never sooner: a thread that
  reads before waiting sees the old contents. Landing into shared elements that a warpgroup
  MMA still reads (before a wgmma.wait_group found it complete) is a schedule bug.
* Placement: the box is written densely, innermost dimension fastest, with the 128-byte
  swizzle on the absolute shared address (the 16-byte unit, bits 4-6, XOR-ed with the
  128-byte row within a 1024-byte atom, bits 7-9), so the destination must be 1024-byte
  aligned and a box row (the innermost dimension) at most 128 bytes.
"""
from __future__ import annotations

import numpy as np

from .wgmma_model import swizzle_128b


class TmaError(RuntimeError):
    pass


class TensorMap:
    """A tensor map made on the host: the flat buffer it describes and its geometry."""

    def __init__(self, buffer: np.ndarray, dtype: str, dims: tuple, strides: tuple, box: tuple):
        self.buffer, self.dtype = buffer, dtype
        self.dims, self.strides, self.box = tuple(dims), (1,) + tuple(strides), tuple(box)
        if len(self.box) != len(self.dims) or not 1 <= len(self.dims) <= 5:
            raise TmaError(f"a tensor map of {len(self.dims)} dimensions with a box of {len(self.box)}")
        self.elem_bytes = {"f16": 2, "bf16": 2, "f32": 4}.get(dtype, 0)
        if not self.elem_bytes:
            raise TmaError(f"a tensor map of {dtype}")
        if any(not 1 <= b <= 256 for b in self.box) or self.box[0] * self.elem_bytes > 128:
            raise TmaError(f"a box of {self.box}: at most 256 elements a dimension, 128 bytes a row")

    def read(self, coords: tuple) -> np.ndarray:
        """The box at `coords` (innermost first), flattened innermost fastest."""
        if len(coords) != len(self.dims):
            raise TmaError(f"a box of a {len(self.dims)}-dimensional tensor at {len(coords)} coordinates")
        grids = np.meshgrid(*[np.arange(b) + int(c) for b, c in zip(self.box, coords)], indexing="ij")
        inside = np.ones(grids[0].shape, bool)
        offset = np.zeros(grids[0].shape, np.int64)
        for g, d, s in zip(grids, self.dims, self.strides):
            inside &= (g >= 0) & (g < d)
            offset += g.astype(np.int64) * s
        vals = np.zeros(grids[0].shape, self.buffer.dtype)
        vals[inside] = self.buffer[offset[inside]]
        return vals.transpose(tuple(range(len(self.box)))[::-1]).reshape(-1)     # innermost fastest


class Mbarriers:
    """A block's mbarriers, by (array name, element): [completed phases, pending arrivals,
    arrivals a phase, transaction bytes, box copies waiting to land]."""

    def __init__(self, kernel_name: str):
        self.state: dict = {}
        self.what = f"kernel `{kernel_name}`"

    def _get(self, key):
        st = self.state.get(key)
        if st is None:
            raise TmaError(f"{self.what}: mbarrier {key[0]}[{key[1]}] used before its init")
        return st

    def init(self, key, count: int):
        if count < 1:
            raise TmaError(f"{self.what}: mbarrier {key[0]}[{key[1]}] initialised to {count} arrivals")
        self.state[key] = [0, count, count, 0, []]

    def arrive(self, key, tx: int = 0):
        st = self._get(key)
        if st[1] == 0:          # pragma: no cover - a phase completes as its count reaches 0
            raise TmaError(f"{self.what}: more arrivals at mbarrier {key[0]}[{key[1]}] than its count")
        st[1] -= 1
        st[3] += tx
        self._complete(st)

    def passed(self, key, parity: int) -> bool:
        return self._get(key)[0] % 2 != parity

    def load(self, key, tmap: TensorMap, coords: tuple, dst: np.ndarray, base: int, index: int,
             tracks):
        """A box copy into shared array `dst` (starting at shared byte `base`) from element
        `index`, counted on mbarrier `key`; `tracks`: dst's race tracker or None."""
        st = self._get(key)
        elem_bytes = tmap.elem_bytes
        start = base + index * elem_bytes
        if start % 1024:
            raise TmaError(f"{self.what}: a swizzled box copy to shared byte {start}, not 1024-byte aligned")
        vals = tmap.read(coords)
        addr = swizzle_128b(start + np.arange(vals.shape[0], dtype=np.int64) * elem_bytes)
        idx = (addr - base) // elem_bytes
        if idx.min() < 0 or idx.max() >= dst.shape[0]:
            raise TmaError(f"{self.what}: a box copy of {vals.shape[0]} elements beyond its shared array")

        def land():
            if tracks is not None and np.any(tracks[2][idx]):
                raise TmaError(f"{self.what}: a box copy lands in shared elements that a warpgroup "
                               "MMA still reads (before a wgmma.wait_group found it complete)")
            dst[idx] = vals
        st[4].append(land)
        st[3] -= vals.shape[0] * elem_bytes
        self._complete(st)

    @staticmethod
    def _complete(st):
        if st[1] == 0 and st[3] == 0:
            copies, st[4] = st[4], []
            for land in copies:
                land()
            st[0] += 1
            st[1] = st[2]
