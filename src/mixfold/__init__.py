"""mixfold: probabilistic models of heterogeneous data, fitted by EM as a fold over statistics.

>>> import numpy as np, mixfold
>>> x = np.random.default_rng(0).normal(3.0, 2.0, size=2000)
>>> model = mixfold.optimize(x, mixfold.GaussianEstimator(), progress=False)
>>> round(model.mu, 1)
2.9
"""

from mixfold.errors import (BandPromotionWarning, CheckpointError, DataError, DataTypeError,
                            DegenerateFitWarning, EMDecreaseWarning, MissingEntriesWarning,
                            ModelFileError, NumericalError, ParameterError)
from mixfold.families import *  # noqa: F403 - the families are the public API
from mixfold.families import __all__ as _family_names
from mixfold.fit import FitResult, IterationInfo, fit, optimize
from mixfold.io import RowBlocks, load, save
from mixfold.online import OnlineEM

__version__ = "0.1.0"

__all__ = [
    "optimize", "fit", "FitResult", "IterationInfo", "save", "load", "RowBlocks", "OnlineEM",
    "DataError", "DataTypeError", "NumericalError", "ParameterError", "ModelFileError",
    "EMDecreaseWarning", "BandPromotionWarning", "DegenerateFitWarning", "MissingEntriesWarning",
    "CheckpointError",
    *_family_names,
]
