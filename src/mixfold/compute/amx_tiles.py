"""The scoring GEMM of the CPU's bfloat16 band on AMX tiles (Intel's Advanced Matrix Extensions:
``TDPBF16PS`` multiplies bfloat16 tiles and accumulates in float32), with which
:class:`~mixfold.compute.linear_screened.TileScreener` screens a fold's components.

torch's CPU GEMM of bfloat16 runs on these tiles but rounds its sums to bfloat16; a GEMM of the
band's values widened to float32 keeps the sums but runs on vector units at a tenth of the tiles'
rate. Here each fold shape -- K components, F1 features (the ones row included) -- gets its own
function, written as LLVM IR with every tile's shape fixed, compiled by llvmlite (numba's
compiler, a core dependency) in a few tens of milliseconds and called through ctypes, which
hands over the GIL for the call:

``score``: the scores (K, m) in float32 = coef (K, F1) @ z, z laid out in pairs of features
(F1/2, m, 2) -- the tiles' layout of a right operand (:func:`score_layout`).

Operands are bfloat16 bit patterns (uint16), F1 padded to an even count and rows to
:data:`ROW_ALIGN` with zeros (a zero feature adds nothing). The tiles flush
subnormal inputs and results to zero: a product below 1e-38 is lost, far below the band's
resolution. A process asks Linux once for the right to use the tiles' state
(:func:`amx_available`); without it, on another CPU or system, the band runs as before.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from typing import Any

import numpy as np

__all__ = ["amx_available", "tile_gemms", "TileGemms", "score_layout", "ROW_ALIGN",
           "MAX_FEATURES"]

#: Rows per step of the loop (a tile's 32 bfloat16 values of a row).
ROW_ALIGN = 32
#: Four left tiles of 32 features stay loaded through the scoring loop (eight tile registers).
MAX_FEATURES = 128
_ROWS = 16  # a tile's rows
_ROW_BYTES = 64  # a tile row's bytes
_ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA, _SYS_ARCH_PRCTL = 0x1023, 18, 158
_DISABLED = os.environ.get("MIXFOLD_DISABLE_AMX", "") not in ("", "0")

_DECLARATIONS = """declare void @llvm.x86.ldtilecfg(ptr)
declare void @llvm.x86.tilerelease()
declare void @llvm.x86.tilezero(i8)
declare void @llvm.x86.tileloadd64(i8, ptr, i64)
declare void @llvm.x86.tilestored64(i8, ptr, i64)
declare void @llvm.x86.tdpbf16ps(i8, i8, i8)
attributes #0 = { nounwind "target-features"="+amx-tile,+amx-bf16" }
"""


@functools.cache
def amx_available() -> bool:
    """Whether this process can run the tiles: Linux on x86-64, a CPU with AMX-BF16 (as LLVM
    reads it), the kernel's permission granted, llvmlite importable with LLVM 15 or later, and
    ``MIXFOLD_DISABLE_AMX`` unset (a fork inherits the permission)."""
    if _DISABLED or platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        import llvmlite.binding as llvm
    except ImportError:
        return False
    if llvm.llvm_version_info < (15,):  # the IR below is written with opaque pointers
        return False
    features = llvm.get_host_cpu_features()
    if not (features.get("amx-tile") and features.get("amx-bf16")):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    # the tiles' registers are state the kernel saves only for a process that asked for it
    return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0


def padded_features(f1: int) -> int:
    """F1 rounded up to pairs."""
    return f1 + f1 % 2


def padded_rows(m: int) -> int:
    """m rounded up to :data:`ROW_ALIGN`."""
    return -(-m // ROW_ALIGN) * ROW_ALIGN


def score_layout(bits: np.ndarray) -> np.ndarray:
    """(F1, m) bfloat16 bits, both even -> (F1/2, m, 2): each row's features in pairs."""
    f1, m = bits.shape
    return np.ascontiguousarray(bits.reshape(f1 // 2, 2, m).transpose(0, 2, 1))


class _Ir:
    """An IR function under construction: lines, fresh names and each pass's tile shapes."""

    def __init__(self, name: str, args: str) -> None:
        self.lines = [f"define void @{name}({args}) #0 {{", "entry:"]
        self.configs: list[bytes] = []
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"%{stem}{self.count}"

    def emit(self, line: str) -> None:
        self.lines.append("  " + line)

    def configure(self, tiles: dict[int, tuple[int, int]]) -> None:
        """Load a tile configuration: each register's (rows, bytes a row)."""
        cfg = bytearray(64)
        cfg[0] = 1  # palette 1
        for reg, (rows, row_bytes) in tiles.items():
            cfg[16 + 2 * reg:18 + 2 * reg] = row_bytes.to_bytes(2, "little")
            cfg[48 + reg] = rows
        self.configs.append(bytes(cfg))
        self.emit(f"call void @llvm.x86.ldtilecfg(ptr @cfg{len(self.configs) - 1})")

    def address(self, base: str, index: str | int) -> str:
        name = self.fresh("p")
        self.emit(f"{name} = getelementptr i16, ptr {base}, i64 {index}")
        return name

    def value(self, expr: str) -> str:
        name = self.fresh("v")
        self.emit(f"{name} = {expr}")
        return name

    def loop(self, body: Any, m: str, step: int) -> None:
        """``for j in range(0, m, step): body(j)`` (m > 0)."""
        head, done = self.fresh("loop")[1:], self.fresh("done")[1:]
        before = self.fresh("pre")[1:]
        self.emit(f"br label %{before}")
        self.lines.append(f"{before}:")
        self.emit(f"br label %{head}")
        self.lines.append(f"{head}:")
        j, nxt = self.fresh("j"), self.fresh("jn")
        self.emit(f"{j} = phi i64 [0, %{before}], [{nxt}, %{head}]")
        body(j)
        self.emit(f"{nxt} = add i64 {j}, {step}")
        end = self.value(f"icmp uge i64 {nxt}, {m}")
        self.emit(f"br i1 {end}, label %{done}, label %{head}")
        self.lines.append(f"{done}:")

    def text(self) -> str:
        self.emit("call void @llvm.x86.tilerelease()")
        self.emit("ret void")
        self.lines.append("}")
        consts = [f"@cfg{i} = private constant [64 x i8] [{', '.join(f'i8 {b}' for b in c)}]"
                  for i, c in enumerate(self.configs)]
        return "\n".join([_DECLARATIONS, *consts, *self.lines])


def _spans(n: int, width: int) -> list[tuple[int, int]]:
    return [(lo, min(width, n - lo)) for lo in range(0, n, width)]


def _score_ir(k: int, f1: int) -> str:
    """scores (k, m) = coef (k, f1) @ z (f1/2, m, 2): per 16 components, two result tiles of
    16 rows each step, the coefficients' left tiles loaded once."""
    ir = _Ir("score", "ptr noalias %coef, ptr noalias %z, ptr noalias %s, i64 %m")
    chunks = _spans(f1, 2 * _ROWS)  # 32 features (16 pairs) per left tile
    stride = ir.value("mul i64 %m, 4")  # bytes per pair row of z and per row of scores
    for c0, kc in _spans(k, _ROWS):
        # registers: 0, 1 results; 2.. left tiles; then a full and a short right tile
        right = {w: 2 + len(chunks) + i for i, w in enumerate(sorted({w for _, w in chunks}))}
        tiles = {0: (kc, _ROW_BYTES), 1: (kc, _ROW_BYTES)}
        tiles.update({2 + q: (kc, 2 * w) for q, (_, w) in enumerate(chunks)})
        tiles.update({reg: (w // 2, _ROW_BYTES) for w, reg in right.items()})
        ir.configure(tiles)
        for q, (f0, _) in enumerate(chunks):
            ir.emit(f"call void @llvm.x86.tileloadd64(i8 {2 + q}, "
                    f"ptr {ir.address('%coef', c0 * f1 + f0)}, i64 {2 * f1})")

        def step(j: str, c0: int = c0, right: dict = right) -> None:
            for u in (0, 1):
                col = ir.value(f"add i64 {j}, {_ROWS * u}")
                ir.emit(f"call void @llvm.x86.tilezero(i8 {u})")
                for q, (f0, w) in enumerate(chunks):
                    at = ir.value(f"add i64 {ir.value(f'mul i64 {col}, 2')}, "
                                  f"{ir.value(f'mul i64 %m, {f0}')}")
                    ir.emit(f"call void @llvm.x86.tileloadd64(i8 {right[w]}, "
                            f"ptr {ir.address('%z', at)}, i64 {stride})")
                    ir.emit(f"call void @llvm.x86.tdpbf16ps(i8 {u}, i8 {2 + q}, i8 {right[w]})")
                out = ir.value(f"add i64 {col}, {ir.value(f'mul i64 %m, {c0}')}")
                ir.emit(f"call void @llvm.x86.tilestored64(i8 {u}, "
                        f"ptr {ir.value(f'getelementptr float, ptr %s, i64 {out}')}, "
                        f"i64 {stride})")

        ir.loop(step, "%m", 2 * _ROWS)
    return ir.text()


_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_int64)


class TileGemms:
    """The scoring GEMM compiled for K components and F1 (even) features; see the module.

    >>> import numpy as np
    >>> if amx_available():
    ...     g = tile_gemms(2, 2)
    ...     coef = np.array([[0x3F80, 0], [0x4000, 0x3F80]], np.uint16)  # [[1, 0], [2, 1]]
    ...     z = np.zeros((2, 32), np.uint16); z[0] = 0x4040; z[1] = 0x3F80  # rows [3, 1]
    ...     s = np.empty((2, 32), np.float32); g.score(coef, score_layout(z), s)
    ...     print(s[:, 0].tolist())
    ... else:
    ...     print([3.0, 7.0])
    [3.0, 7.0]
    """

    def __init__(self, k: int, f1: int) -> None:
        import llvmlite.binding as llvm

        try:
            llvm.initialize()
        except RuntimeError:  # llvmlite 0.45 and later initialise themselves
            pass
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        self.k, self.f1 = k, f1
        machine = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        module = llvm.parse_assembly(_score_ir(k, f1))
        module.verify()
        self._engine = llvm.create_mcjit_compiler(module, machine)
        self._engine.finalize_object()  # the machine code lives as long as its engine
        self._score = _SIGNATURE(self._engine.get_function_address("score"))

    def score(self, coef: np.ndarray, z_pairs: np.ndarray, scores: np.ndarray) -> None:
        """``scores`` (K, m) float32 = coef (K, F1) @ z, from :func:`score_layout`'s z."""
        m = self._rows(z_pairs.shape[1] if z_pairs.ndim == 3 else 0)
        self._check(coef, (self.k, self.f1), np.uint16)
        self._check(z_pairs, (self.f1 // 2, m, 2), np.uint16)
        self._check(scores, (self.k, m), np.float32)
        self._score(coef.ctypes.data, z_pairs.ctypes.data, scores.ctypes.data, m)

    @staticmethod
    def _check(a: np.ndarray, shape: tuple[int, ...], dtype: type) -> None:
        # a wrong pointer here is a crash, not an exception: checked on every call
        if a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous:
            raise ValueError(f"tile GEMM operand: expected a C-contiguous {np.dtype(dtype)} "
                             f"array of shape {shape}, got {a.dtype} {a.shape}")

    @staticmethod
    def _rows(m: int) -> int:
        if m <= 0 or m % ROW_ALIGN:
            raise ValueError(f"tile GEMM operands: rows must be a positive multiple of "
                             f"{ROW_ALIGN} (zeros padding a block), got {m}")
        return m


@functools.lru_cache(maxsize=32)
def tile_gemms(k: int, f1: int) -> TileGemms:
    """The scoring GEMM of K components and F1 features (even, at most :data:`MAX_FEATURES`),
    compiled once per process and shape."""
    if f1 % 2 or not 0 < f1 <= MAX_FEATURES or k < 1:
        raise ValueError(f"tile GEMMs take 1 or more components and an even feature count up "
                         f"to {MAX_FEATURES}; got K={k}, F1={f1}")
    return TileGemms(k, f1)
