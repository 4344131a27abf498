"""The emulator's model of the warpgroup MMA (PTX `wgmma.mma_async` m64nNkK, sm_90a), from
the PTX ISA's description of the hardware rather than from the schedule that uses it.

* A shared-memory operand is named by a 64-bit matrix descriptor: bits 0-13 the start
  address >> 4, 16-29 the leading dimension byte offset (LBO) >> 4, 32-45 the stride
  dimension byte offset (SBO) >> 4, 49-51 the matrix base offset, 62-63 the swizzle mode
  (1: 128 bytes, the only one modelled). `descriptor` builds one as the CUDA dialect's
  `zyn_wgmma_desc` does; `addresses` decodes it back into the byte address of every element.
* The 128-byte swizzle: an element's address is laid out as if unswizzled (the canonical
  layouts below), then its 16-byte unit, bits 4-6 of the address, is XOR-ed with bits 7-9
  (the 128-byte row within a 1024-byte atom), on the absolute shared address.
* Canonical layouts of 16-bit elements (T = 8 elements make 16 bytes): K-major, element
  (x, k) of the x-th row of M or N and k < 16 at start + (x / 8) SBO + (x % 8) 128 + 2 k
  (LBO unused: a K step's 32 bytes lie within a 128-byte row); MN-major, at start +
  (x / 64) LBO + 2 (x % 64) + (k % 8) 128 + (k / 8) SBO. TF32 steps (k < 8, 4-byte
  elements) are K-major only, at start + (x / 8) SBO + (x % 8) 128 + 4 k; the hardware
  ignores an element's low 13 mantissa bits (modelled: they are cut off).
* A from registers (`ir.WarpgroupMma.a_regs`): each warp of the warpgroup gives its 16 rows
  of A as mma.sync m16n8k16's (tf32: m16n8k8's) A fragment (`fragments_a`), the PTX ISA's
  register layout.
* Scale-d 0 (`ir.WarpgroupMma.fresh`): D = A B, the accumulators' old values unread.
* The accumulators: thread 32 w + l of the warpgroup holds D's (16 w + l / 4 + 8 (e // 2),
  8 i + 2 (l % 4) + e % 2) at 4 i + e. Products are exact, sums made in f64 then rounded
  to f32 and added to C (as the emulator's `mma.sync`).

A step is asynchronous: each thread's results land in its accumulators when a
`wgmma.wait_group` finds the step's group complete (`InFlight`); later steps on the same
accumulators see the pending values, as the hardware chains them. The shared elements the
step read must keep their values until then: a change is a schedule bug, reported when the
step lands.
"""
from __future__ import annotations

import numpy as np

SWIZZLE_128B = 1
ROW = 128                   # bytes of a swizzled row
THREADS = 128               # a warpgroup: four warps


class WgmmaError(RuntimeError):
    pass


def descriptor(address: int, lbo: int, sbo: int) -> int:
    """The descriptor of an operand at shared byte `address` (128-byte swizzle)."""
    address, lbo, sbo = int(address), int(lbo), int(sbo)
    return (((address & 0x3FFFF) >> 4) | (((lbo >> 4) & 0x3FFF) << 16)
            | (((sbo >> 4) & 0x3FFF) << 32) | (SWIZZLE_128B << 62))


def decode(desc: int) -> tuple:
    """(start, lbo, sbo, base offset, swizzle mode) of a descriptor, in bytes."""
    return ((desc & 0x3FFF) << 4, ((desc >> 16) & 0x3FFF) << 4, ((desc >> 32) & 0x3FFF) << 4,
            (desc >> 49) & 7, (desc >> 62) & 3)


def swizzle_128b(address):
    """The 128-byte swizzle of byte addresses (numpy integers)."""
    return address ^ (((address >> 7) & 7) << 4)


def addresses(desc: int, rows: int, kmajor: bool, elem_bytes: int = 2) -> np.ndarray:
    """The byte addresses (rows x K) of an operand's elements (x, k): x < rows along M (A)
    or N (B), k < K, the 32 bytes of a step (16 elements of 2 bytes, 8 of 4)."""
    start, lbo, sbo, base, mode = decode(desc)
    if mode != SWIZZLE_128B or base:
        raise WgmmaError(f"a descriptor of swizzle mode {mode}, base offset {base}: only the "
                         "128-byte swizzle at base offset 0 is modelled")
    if (start >> 7) & 7:    # the PTX ISA: base offset (start >> 7) & 7 where not on a boundary
        raise WgmmaError(f"a descriptor starting at shared byte {start}, off the swizzle "
                         "pattern's 1024-byte boundary by whole rows, with base offset 0")
    x = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(32 // elem_bytes, dtype=np.int64)[None, :]
    if kmajor:
        lin = start + (x // 8) * sbo + (x % 8) * ROW + k * elem_bytes
    else:
        per = ROW // elem_bytes
        lin = start + (x // per) * lbo + (x % per) * elem_bytes + (k % 8) * ROW + (k // 8) * sbo
    return swizzle_128b(lin)


def gather(addr: np.ndarray, shared: list, layout: list, dtype: str, what: str, eb: int = 2):
    """(array number, element indices, values) of byte addresses that must all fall in one
    shared array of `dtype`, `eb` bytes each on the device (f16 and bf16 are held as f32 by
    the emulator); `layout`: (base byte, bytes, dtype) of each shared array."""
    lo = int(addr.min())
    for n, (base, size, dt) in enumerate(layout):
        if base <= lo < base + size:
            break
    else:
        raise WgmmaError(f"{what} reads shared byte {lo}, in no shared array")
    base, size, dt = layout[n]
    if dt != dtype:
        raise WgmmaError(f"{what} reads a shared array of {dt} as {dtype}")
    if int(addr.max()) + eb > base + size or np.any((addr - base) % eb):
        raise WgmmaError(f"{what} reads beyond its shared array or between its elements")
    idx = (addr - base) // eb
    return n, idx, shared[n][idx]


def multiply(events: list, n: int, kmajor: tuple, dtype: str, shared: list, layout: list,
             tracks: list | None, kernel_name: str) -> list:
    """What each of a warpgroup's 128 threads gets back from an m64nNkK step: (its new
    accumulators, a check of the shared elements read, for the first thread, else None).
    `events`: each thread's (accumulators, A descriptor, B descriptor, fresh), or, where A
    comes from registers (`kmajor[0]` None), its elements of A in place of the descriptor;
    `tracks`: the block's race trackers (the reads count as the first thread's)."""
    what = f"kernel `{kernel_name}`: a warpgroup MMA"
    if len(events) != THREADS:
        raise WgmmaError(f"{what} over {len(events)} threads, not a warpgroup of {THREADS}")
    da, db, fresh = events[0][1], events[0][2], events[0][3]
    regs = kmajor[0] is None
    if any(e[2] != db or e[3] != fresh or (not regs and e[1] != da) for e in events):
        raise WgmmaError(f"{what} whose threads give different descriptors or scale-d")
    tf32 = dtype == "tf32"
    shared_dt, eb = ("f32", 4) if tf32 else (dtype, 2)
    reads = [gather(addresses(db, n, kmajor[1], eb), shared, layout, shared_dt, what, eb)]
    if regs:
        a = fragments_a([e[1] for e in events])
    else:
        reads.insert(0, gather(addresses(da, 64, kmajor[0], eb), shared, layout, shared_dt, what, eb))
        a = np.asarray(reads[0][2], np.float64)
    b = np.asarray(reads[-1][2], np.float64)
    if tf32:
        a, b = _tf32_cut(a), _tf32_cut(b)
    c = np.zeros((64, n), np.float32)
    for t, (cv, *_) in enumerate(events if not fresh else ()):
        w, lane = divmod(t, 32)
        for i in range(n // 8):
            for e in range(4):
                c[16 * w + lane // 4 + 8 * (e // 2), 8 * i + 2 * (lane % 4) + e % 2] = cv[4 * i + e]
    d = (a @ b.T).astype(np.float32) + c
    first = None
    if tracks:
        _read(tracks, reads, what)
    snapshot = [(shared[arr], idx, np.array(v)) for arr, idx, v in reads]

    def check():
        for arr, idx, v in snapshot:
            now = arr[idx]
            if not np.array_equal(now, v, equal_nan=True):
                raise WgmmaError(f"{what}: the shared elements it read changed before a "
                                 "wgmma.wait_group found it complete")
        if tracks:
            for arr, idx, _ in reads:
                np.subtract.at(tracks[arr][2], idx.ravel(), 1)
    out = []
    for t in range(THREADS):
        w, lane = divmod(t, 32)
        vals = tuple(d[16 * w + lane // 4 + 8 * (e // 2), 8 * i + 2 * (lane % 4) + e % 2]
                     for i in range(n // 8) for e in range(4))
        out.append((vals, check if t == 0 else first))
    return out


def _tf32_cut(x: np.ndarray) -> np.ndarray:
    """f32 values with their low 13 mantissa bits cleared (as the hardware reads TF32)."""
    bits = np.asarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32).astype(np.float64)


def fragments_a(held: list) -> np.ndarray:
    """The 64 x K A of the threads' register fragments: warp w's rows 16 w .., lane l's
    elements 2 p + h at row l / 4 + 8 (p % 2), column 2 (l % 4) + h + 8 (p // 2) (the PTX
    ISA's A fragment of m64nNk16, each warp's as mma.sync m16n8k16's); of four elements
    (tf32), element p at row l / 4 + 8 (p % 2), column l % 4 + 4 (p // 2) (m16n8k8's)."""
    if len(held[0]) == 4:
        a = np.zeros((64, 8), np.float64)
        for t, vals in enumerate(held):
            w, lane = divmod(t, 32)
            for p in range(4):
                a[16 * w + lane // 4 + 8 * (p % 2), lane % 4 + 4 * (p // 2)] = vals[p]
        return a
    a = np.zeros((64, 16), np.float64)
    for t, vals in enumerate(held):
        w, lane = divmod(t, 32)
        for p in range(4):
            for h in range(2):
                a[16 * w + lane // 4 + 8 * (p % 2), 2 * (lane % 4) + h + 8 * (p // 2)] = vals[2 * p + h]
    return a


def _read(tracks: list, reads: list, what: str, reader: int = -3):
    """The step's shared reads in the block's race trackers: an element another thread wrote
    since the last barrier, or one whose writer has made no fence.proxy.async since (ordinary
    and cp.async writes are not the asynchronous proxy's to see before), is a race; a later
    write before the next barrier, or before the step completes, is one too (the step counts
    in the tracker's third array till then)."""
    for arr, idx, _ in reads:
        w, r, busy, unfenced = tracks[arr]
        np.add.at(busy, idx.ravel(), 1)
        flat = idx.ravel()
        if np.any(unfenced[flat] != -1):
            bad = int(flat[np.argmax(unfenced[flat] != -1)])
            raise WgmmaError(f"{what} reads shared element {bad}, which thread {int(unfenced[bad])} "
                             "wrote with no fence.proxy.async after it")
        if np.any(w[flat] != -1):
            bad = int(flat[np.argmax(w[flat] != -1)])
            raise WgmmaError(f"{what} reads shared element {bad}, which thread {int(w[bad])} "
                             "wrote with no barrier in between")
        r[flat] = np.where(r[flat] == -1, reader, -2)


class InFlight:
    """A thread's warpgroup MMAs: results not yet landed, by group (oldest first), and the
    newest value of each accumulator element a step in flight will write."""
    __slots__ = ("open", "groups", "latest")

    def __init__(self):
        self.open, self.groups, self.latest = [], [], {}

    def values(self, arr, at: int, count: int) -> tuple:
        if at < 0 or at + count > arr.shape[0]:
            raise WgmmaError(f"warpgroup MMA accumulators {at} .. {at + count} outside their "
                             f"{arr.shape[0]} registers")
        return tuple(self.latest.get((id(arr), at + w), arr[at + w]) for w in range(count))

    def issue(self, arr, at: int, got, reads=None):
        """A step on accumulators arr[at ..] (`got`: its results and their check), reading
        A from registers `reads` ((array, first, count)) or None."""
        vals, check = got
        for w, v in enumerate(vals):
            self.latest[(id(arr), at + w)] = v
        self.open.append((arr, at, vals, check, reads))

    def written(self, arr, at: int):
        """A register about to be written by the thread: an error where a step still in
        flight reads it as A (the hardware reads A until the step's group completes)."""
        for step in [s for g in self.groups for s in g] + self.open:
            reads = step[4]
            if reads is not None and reads[0] is arr and reads[1] <= at < reads[1] + reads[2]:
                raise WgmmaError(f"register {at} of a warpgroup MMA's A written while the MMA "
                                 "is in flight (before its wgmma.wait_group)")

    def commit(self):
        self.groups.append(self.open)
        self.open = []

    def wait(self, pending: int):
        landed = False
        while len(self.groups) > pending:
            landed = True
            for arr, at, vals, check, _ in self.groups.pop(0):
                if check is not None:
                    check()
                arr[at:at + len(vals)] = vals
        if landed:      # what a landed step wrote is the registers' own now (the thread may
            self.latest.clear()     # change it); the steps still in flight, newest last
            for arr, at, vals, _, _ in [s for g in self.groups for s in g] + self.open:
                for w, v in enumerate(vals):
                    self.latest[(id(arr), at + w)] = v
