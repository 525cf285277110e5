"""How a mixture's E-step runs a fold: one plan, made once per fold from what the model's
units can do and from the precision (its band and engine), so that no family compares engine
names.

What the units can do is declared by their accumulator class's capabilities
(:mod:`mixfold.capabilities`) and read by :func:`fusion_of`: a
:class:`~mixfold.capabilities.FusedFold` family runs its own fused pass, a
:class:`~mixfold.capabilities.LinearInFeatures` one the fused linear E-step
(:func:`~mixfold.compute.band_engines.fused_linear_mixture`), a
:class:`~mixfold.capabilities.LinearInFeaturesInBands` one that E-step in the bands below
float32 only. :func:`plan_estep` then picks one of four paths:

- ``FUSED``: score, normalise and add in one pass; should the pass decline these parameters (a
  Poisson of rate 0), the three steps run instead;
- ``THREE_STEPS``: score a (rows, K) matrix, normalise it into posteriors by a stable
  log-sum-exp, add each unit's column to its accumulator (in float64 for a band without the
  fused E-step: nothing bounds its scores' error to screen with);
- ``IN_BAND``: every step in the band's element-by-element operations (``<band>@emulated``);
- ``DOUBLE_DOUBLE``: posteriors in double-double, statistics summed in double-double (``dd``).

>>> from mixfold.precision import FLOAT64, resolve_precision
>>> plan = plan_estep(Fusion.EVERYWHERE, FLOAT64, 1000)
>>> plan.path.name, plan.chunk_rows, plan.three_step_rows
('FUSED', 1048576, 1000)
>>> plan_estep(Fusion.IN_BANDS, FLOAT64, 1000).path.name
'THREE_STEPS'
>>> names = ("dd", "bfloat16@emulated", "float32")
>>> [plan_estep(Fusion.NONE, resolve_precision(p)).path.name for p in names]
['DOUBLE_DOUBLE', 'IN_BAND', 'THREE_STEPS']
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mixfold.capabilities import FusedFold, LinearInFeatures, LinearInFeaturesInBands
from mixfold.compute.band_engines import fused_linear_mixture
from mixfold.compute.linear_torch import GPU_CHUNK_ROWS
from mixfold.precision.bands import FLOAT64, Engine, Precision

__all__ = ["Fusion", "EStep", "EStepPlan", "plan_estep", "fusion_of", "fused_pass_of",
           "FUSED_CHUNK_ROWS"]

#: Rows per chunk a fused E-step takes (its temporaries are per row block, so a chunk costs
#: 8 bytes a row): fewer chunks, less waiting for the last row block of each.
FUSED_CHUNK_ROWS = 1 << 20


class Fusion(Enum):
    """Where a stack of units scores, normalises and adds a chunk in one fused pass."""

    NONE = "none"
    IN_BANDS = "in the bands"  # its exact native path is the faster one
    EVERYWHERE = "everywhere"


class EStep(Enum):
    """The E-step paths (see the module's text)."""

    FUSED = "fused"
    THREE_STEPS = "three steps"
    IN_BAND = "in the band"
    DOUBLE_DOUBLE = "double-double"


@dataclass(frozen=True)
class EStepPlan:
    """One fold's E-step: its ``path``; the ``chunk_rows`` each call takes; the rows each pass
    of the three steps takes (``three_step_rows``, ``None``: the whole chunk), and the
    ``fusion`` and ``precision`` the plan was made for."""

    path: EStep
    chunk_rows: int | None
    three_step_rows: int | None
    fusion: Fusion
    precision: Precision

    @property
    def scores_in(self) -> str:
        """The precision the three steps score in: the fold's own where the families run it
        natively, else float64 (a band checks the model runs in it first)."""
        return self.precision if self.precision.native else FLOAT64

    def made_for(self, fusion: Fusion, precision: Precision) -> bool:
        """Whether this plan is the one :func:`plan_estep` makes for ``fusion`` and
        ``precision`` (a fold's plan serves each of its chunks)."""
        return fusion is self.fusion and precision == self.precision


def fused_pass_of(accumulator_class: type) -> Callable[..., Any] | None:
    """The fused pass over K accumulators of one class, ``fold(accs, components, log_weights,
    enc, weights, precision) -> (mass, log-density) | None``: the family's own ``stack_fold``,
    the fused linear E-step, or ``None`` (no fused pass)."""
    if issubclass(accumulator_class, FusedFold):
        return accumulator_class.stack_fold
    if issubclass(accumulator_class, LinearInFeatures):
        return fused_linear_mixture
    return None


@functools.cache  # a class's capabilities (its bases) do not change: asked once per class
def fusion_of(accumulator_class: type) -> Fusion:
    """Where a stack of accumulators of this class fuses (its declared capabilities): a
    family's own fused pass says itself when it runs (it declines otherwise)."""
    if fused_pass_of(accumulator_class) is None:
        return Fusion.NONE
    if issubclass(accumulator_class, LinearInFeaturesInBands) and \
            not issubclass(accumulator_class, FusedFold):
        return Fusion.IN_BANDS
    return Fusion.EVERYWHERE


@functools.lru_cache(maxsize=256)  # a plan is a value: one per (fusion, precision, rows)
def plan_estep(fusion: Fusion, precision: Precision, chunk_rows: int | None = None) -> EStepPlan:
    """The E-step of units that fuse as ``fusion`` in ``precision``, for a fold that asks for
    ``chunk_rows`` per call (``None``: the rows each call is given, as a nested node)."""
    p = precision
    on_torch = p.engine is Engine.TORCH
    if fusion is not Fusion.NONE and (on_torch or p.native and fusion is Fusion.EVERYWHERE):
        path = EStep.FUSED
    elif p.compensated:
        path = EStep.DOUBLE_DOUBLE
    elif p.engine is Engine.EMULATED:
        path = EStep.IN_BAND
    else:
        path = EStep.THREE_STEPS
    rows = chunk_rows
    if chunk_rows is not None and fusion is not Fusion.NONE and (p.native or on_torch):
        # a fused pass's temporaries do not grow with the chunk (a GPU's chunk pays a copy)
        big = GPU_CHUNK_ROWS if on_torch and p.device.startswith("cuda") else FUSED_CHUNK_ROWS
        rows = max(chunk_rows, big)
    # the three steps of a native fold take the rows the fold asked for, whatever the chunk
    return EStepPlan(path, rows, chunk_rows if p.native else None, fusion, p)
