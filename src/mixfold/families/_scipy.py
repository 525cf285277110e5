"""The scipy functions the families call, imported from scipy on their first call.

``import scipy.special`` costs ~0.25 s and ~27 MB of resident memory (its array-API layer comes
with it): half of ``import mixfold`` and a sixth of the peak memory of a million-row diagonal
Gaussian fit, which never calls scipy. Each name here is a thin caller that imports its scipy
module when first called and then calls the function itself.

>>> from mixfold.families._scipy import gammaln
>>> float(gammaln(5.0))  # log(4!)
3.1780538303479458
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["betaln", "csr_matrix", "digamma", "dpotrf", "dtrtrs", "gammaln", "i0e", "i1e",
           "logsumexp", "multigammaln", "polygamma", "xlog1py", "xlogy"]


def _on_first_call(module: str, name: str) -> Callable[..., Any]:
    found: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not found:
            found.append(getattr(importlib.import_module(module), name))
        return found[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{module}.{name}``, imported on the first call."
    return call


# LAPACK's own routines, which scipy.linalg's ``cholesky`` and ``solve_triangular`` call (the
# same bits) after checks that cost more than the factorisation of a small matrix
dpotrf = _on_first_call("scipy.linalg.lapack", "dpotrf")
dtrtrs = _on_first_call("scipy.linalg.lapack", "dtrtrs")
csr_matrix = _on_first_call("scipy.sparse", "csr_matrix")
betaln = _on_first_call("scipy.special", "betaln")
digamma = _on_first_call("scipy.special", "digamma")
gammaln = _on_first_call("scipy.special", "gammaln")
i0e = _on_first_call("scipy.special", "i0e")
i1e = _on_first_call("scipy.special", "i1e")
logsumexp = _on_first_call("scipy.special", "logsumexp")
multigammaln = _on_first_call("scipy.special", "multigammaln")
polygamma = _on_first_call("scipy.special", "polygamma")
xlog1py = _on_first_call("scipy.special", "xlog1py")
xlogy = _on_first_call("scipy.special", "xlogy")
