"""Rows scored under records where some field values cannot be scored (a level never seen at
fit, a NaN in a field without missing values): those fields are left out of their rows, as
missing values are (what ``mixfold predict`` and the scikit-learn wrappers score new rows by)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from mixfold.errors import DataError
from mixfold.families._protocol import Distribution

__all__ = ["records_log_densities"]


def _field_values(rows: Any, name: str) -> list[Any]:
    if hasattr(rows, "columns"):  # a DataFrame
        return list(rows[name])
    return [r.get(name) if isinstance(r, Mapping) else r[name] for r in rows]


def records_log_densities(records: Sequence[Distribution], rows: Any) -> np.ndarray:
    """Log-density of every row under each of ``records`` (:class:`~mixfold.RecordDistribution`
    with the same fields), array of shape (n_rows, len(records)), where a field value the
    records cannot score (a level never seen at fit, a NaN in a field without missing values) is
    left out of its row: that field is marginalised out there, as a missing value.

    >>> from mixfold import CategoricalDistribution, GaussianDistribution, RecordDistribution
    >>> r = RecordDistribution({"x": GaussianDistribution(0, 1),
    ...                         "city": CategoricalDistribution({"Oslo": 1.0})})
    >>> rows = [{"x": 0.0, "city": "Paris"}, {"x": float("nan"), "city": "Oslo"}]
    >>> records_log_densities([r], rows).round(4).tolist()
    [[-0.9189], [0.0]]
    """
    names = list(records[0].fields)
    n = len(rows)
    out = np.zeros((n, len(records)))
    for name in names:
        values = _field_values(rows, name)
        fields = [rec.fields[name] for rec in records]
        dropped = np.zeros(n, dtype=bool)
        stand_in = fields[0].sampler(0).sample(1)[0]  # a value every record scores
        while True:  # replace each value the field cannot encode, then encode again
            try:
                enc = fields[0].encoder().encode(values)
                break
            except DataError as err:
                if err.row is None or dropped[err.row]:
                    raise
                dropped[err.row], values[err.row] = True, stand_in
        for k, field in enumerate(fields):
            out[:, k] += np.where(dropped, 0.0, field.seq_log_density(enc))
    return out
