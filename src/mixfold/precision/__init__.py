"""Precision bands: the arithmetic an E-step's log-densities and responsibilities run in.

Bands, least to most accurate: ``fp8`` (e4m3), ``bfloat16``, ``float16``, ``float32``,
``float64`` and ``dd`` (double-double), each with its unit roundoff in :data:`UNIT_ROUNDOFF`.
Every family runs ``float64`` and ``float32`` natively on a CPU. Each band is run by an engine
(``Precision.engine``): mixtures of families linear in their features (Gaussians -- diagonal and
full --, Poisson, categorical, log-Gaussian, records of them) run the bands up to float32 with
the band's GEMM screening the components and float64 rescoring each row's candidates
(:mod:`~mixfold.compute.screened`), on this CPU (``"bfloat16"``, ``"bfloat16@cpu"``:
:mod:`~mixfold.compute.linear_screened`) or a GPU (``"bfloat16@cuda"``, and fp8 where the GPU
has it: :mod:`~mixfold.compute.linear_torch`); each band keeps the promise of
:data:`FIT_DISTANCE`. The emulator, the accuracy reference, runs every arithmetic step of
Gaussian, DiagonalGaussian, MultivariateGaussian and mixtures of them in the band
(``"bfloat16@emulated"``, :mod:`~mixfold.precision.emulation`: exact rounding through
``ml_dtypes``). Sufficient statistics are accumulated in float64 (float32 GEMMs first sum up to
2,048 rows, then those partial sums are added in float64) -- or, for ``dd``, in double-double
(:mod:`~mixfold.precision.compensated`), so that they no longer depend on how rows are chunked
or sharded. The M-step always runs in float64.

>>> UNIT_ROUNDOFF["float32"] == 2.0 ** -24
True
>>> native_dtype("float32")
dtype('float32')
>>> [b for b in BANDS if UNIT_ROUNDOFF[b] <= 1e-7]
['float32', 'float64', 'dd']
"""

from mixfold.precision.bands import (BANDS, DEFAULT_PRECISION, DOUBLE_DOUBLE, FLOAT64,
                                     UNIT_ROUNDOFF, Engine, Precision,
                                     band_of, resolve_precision, require_resolved,
                                     check_bands, check_precision, is_native, most_accurate,
                                     native_dtype, parse_precision, promoted, FIT_DISTANCE,
                                     PARAMETER_DISTANCE, log_likelihood_resolution)
from mixfold.precision.engines import band_ops
from mixfold.precision.error import (fused_statistics_bound, predicted_relative_error,
                                     relative_error, statistics_error_bound)
from mixfold.precision.support import BandSupportError, log_density_in_band, require_band

__all__ = ["BANDS", "UNIT_ROUNDOFF", "DEFAULT_PRECISION", "FLOAT64", "DOUBLE_DOUBLE", "Engine",
           "Precision",
           "resolve_precision", "require_resolved", "check_precision",
           "check_bands", "native_dtype", "parse_precision", "band_of", "is_native",
           "most_accurate",
           "predicted_relative_error", "statistics_error_bound", "fused_statistics_bound",
           "relative_error",
           "BandSupportError",
           "log_density_in_band", "require_band", "band_ops", "promoted", "FIT_DISTANCE",
           "PARAMETER_DISTANCE", "log_likelihood_resolution"]

