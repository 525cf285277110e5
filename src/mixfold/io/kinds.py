"""What a fit's input is, looked at once: :func:`kind_of` sorts the data a user hands over into a
small :class:`Kind` (a path, a source of row blocks, rows already encoded, a table, an engine's
collection, plain rows), and the steps after it -- turning a path or a table into rows
(:func:`mixfold.io.tables.as_fit_input`), choosing where the rows are encoded and placed
(:func:`mixfold.dispatch.open_backend`) -- branch on that value. Engines' types are recognised by
their module's name, so nothing is imported to ask.

>>> import numpy as np, pandas as pd
>>> kind_of("rows.parquet"), kind_of(pd.DataFrame({"x": [1.0]})), kind_of(np.zeros(3))
(<Kind.PATH: 'path'>, <Kind.TABLE: 'table'>, <Kind.ROWS: 'rows'>)
>>> Kind.DASK.on_engine, Kind.TABLE.on_engine
(True, False)
"""

from __future__ import annotations

import os
from enum import Enum
from typing import Any

from mixfold.compute.encoded import Encoded
from mixfold.io.readers import RowBlocks, _is_arrow_table, _is_pandas_frame

__all__ = ["Kind", "kind_of"]


class Kind(Enum):
    """The kinds of input a fit takes."""

    PATH = "path"  #: a file or folder path (Parquet, CSV, ``.npy``)
    ROW_BLOCKS = "row_blocks"  #: a :class:`~mixfold.RowBlocks` source, read block by block
    ENCODED = "encoded"  #: rows already encoded for the estimator
    TABLE = "table"  #: an Arrow table or record batch, a pandas DataFrame
    SPARK = "spark"  #: a Spark DataFrame, encoded on its executors
    DASK = "dask"  #: a Dask DataFrame, Series or Array, encoded on its workers
    RAY = "ray"  #: a Ray dataset, encoded on its workers
    ROWS = "rows"  #: anything else: rows in memory, as the estimator's encoder reads them

    @property
    def on_engine(self) -> bool:
        """Whether the rows live in an engine's collection (encoded where they live)."""
        return self in (Kind.SPARK, Kind.DASK, Kind.RAY)


def kind_of(data: Any) -> Kind:
    """The :class:`Kind` of ``data``."""
    if isinstance(data, (str, os.PathLike)):
        return Kind.PATH
    if isinstance(data, RowBlocks):
        return Kind.ROW_BLOCKS
    if isinstance(data, Encoded):
        return Kind.ENCODED
    if _is_arrow_table(data) or _is_pandas_frame(data):
        return Kind.TABLE
    cls = type(data)
    top = cls.__module__.split(".")[0]
    if cls.__module__.startswith("pyspark.sql") and cls.__name__ == "DataFrame":
        return Kind.SPARK
    if top == "dask" and cls.__name__ in ("DataFrame", "Series", "Array"):
        return Kind.DASK
    if any(c.__module__.startswith("ray.data") and c.__name__ == "Dataset" for c in cls.__mro__):
        return Kind.RAY
    return Kind.ROWS
