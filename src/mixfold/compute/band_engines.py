"""Which engine runs the fused linear E-step of a precision: on a CPU, NumPy's
(:func:`~mixfold.compute.linear.linear_fold`) for float64 and the screened engine
(:class:`~mixfold.compute.linear_screened.ScreenedEStep`: the band screens, float64 decides;
AMX tiles screen bfloat16 where the processor has them) for float32, float16 and bfloat16;
torch's (:class:`~mixfold.compute.linear_torch.TorchFusedEStep`) on ``cuda``, for fp8, and for
float64 named on a torch device.

>>> import numpy as np
>>> from mixfold.families.poisson import PoissonAccumulator, PoissonDistribution
>>> from mixfold.families._protocol import ArrayEncoded
>>> accs = [PoissonAccumulator() for _ in range(2)]
>>> comps = [PoissonDistribution(1.0), PoissonDistribution(6.0)]
>>> enc = ArrayEncoded(np.array([0, 1, 7, 9]))
>>> from mixfold.precision import resolve_precision
>>> mass, lse = fused_linear_mixture(accs, comps, np.log([.5, .5]), enc, np.ones(4),
...                                  resolve_precision("float32"))
>>> mass.round(3).tolist()
[1.955, 2.045]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.encoded import Encoded
from mixfold.compute.linear import LinearTerms, linear_fold
from mixfold.compute.linear_screened import ScreenedEStep
from mixfold.compute.linear_torch import TorchFusedEStep
from mixfold.compute.screened import screens
from mixfold.precision.bands import Engine
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["fused_linear_fold", "fused_linear_mixture", "engine_for"]


def engine_for(terms: Sequence[LinearTerms], precision: Precision) -> type | None:
    """The engine class that runs ``precision`` for these terms; ``None`` for NumPy's float64
    fold."""
    p = precision
    on_cpu = p.engine is Engine.NUMPY or p.device == "cpu"
    if on_cpu and screens(p.band) and p.band != "fp8":
        return ScreenedEStep
    return TorchFusedEStep if p.engine is Engine.TORCH else None


def fused_linear_fold(terms: Sequence[LinearTerms], log_weights: np.ndarray, enc: Encoded,
                      weights: np.ndarray, precision: Precision = FLOAT64
                      ) -> tuple[np.ndarray, np.ndarray]:
    """The fused mixture E-step on the engine ``precision`` names (:func:`engine_for`).
    Returns (posterior mass per component, per-row log-density)."""
    engine = engine_for(terms, precision)
    if engine is None:
        return linear_fold(terms, log_weights, enc, weights, precision)
    return engine(terms, log_weights, enc, weights, precision).run()


def fused_linear_mixture(accs: Sequence[Any], components: Sequence[Any], log_weights: np.ndarray,
                         enc: Encoded, weights: np.ndarray, precision: Precision = FLOAT64
                         ) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`~mixfold.compute.linear.fold_linear_mixture` on the engine ``precision`` names;
    ``None`` when the components' parameters fall outside the form."""
    terms = type(accs[0]).linear_terms(accs, components, enc)
    return None if terms is None else fused_linear_fold([terms], log_weights, enc, weights,
                                                        precision)
