"""Tables as input: default families from column types, Arrow tables, and data files by path.

A column's type picks the family it gets when a spec says ``"*": "auto"`` (or when
:class:`mixfold.sklearn.MixedTypeClustering` builds its record), unless the spec names the column:

============================  ==========================================================
column type                   default spec node
============================  ==========================================================
boolean                       ``"bernoulli"``
integer, all values >= 0      ``"poisson"`` (counts), or ``"negative_binomial"`` when the
                              variance is more than :data:`FAR_OVERDISPERSION` times the mean;
                              all distinct (an identifier, at least 20 rows): left out, with a
                              note
integer with negative values  ``"gaussian"``
floating point                ``"gaussian"``, or ``"beta"`` when every value is in (0, 1)
text, categorical             ``"categorical"``
token lists, long text        ``{"lda": {"n_topics": 10}}`` (a topic model)
============================  ==========================================================

The variance of a count column is read from pandas, Arrow and Spark columns, not from Parquet
metadata (which holds only minima and maxima: a Parquet count column stays ``"poisson"``).
Text is long when its values hold :data:`LONG_TEXT_WORDS` words or more on average (in the first
:data:`TEXT_SAMPLE` values); a column of lists of strings is a column of token lists.

A column that holds missing values (None, NaN, nulls) gets ``{"optional": <that node>}``. Other
types (dates, nested lists) have no default: name the column's family in the spec (the default
is only an error if the spec uses it).

Files: ``*.parquet`` (or a folder of them) and ``*.csv`` (or a folder of them) become
:class:`~mixfold.RowBlocks` sources, read one Parquet row group / one CSV chunk at a time, never
whole; ``*.npy`` files are loaded as arrays (never with pickle), ``*.jsonl`` files (JSON lines)
as a DataFrame (objects) or an array. pandas and pyarrow are imported
only when a table or a file is read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from mixfold.compute.tree import shard_bounds
from mixfold.families._protocol import Estimator
from mixfold.backends import backend_name
from mixfold.io.kinds import Kind, kind_of
from mixfold.io.readers import (RowBlocks, _files, _is_arrow_table, _is_pandas_frame,
                                read_npy, reads_named_fields,
                                table_rows)
from mixfold.spec import LeftOut, NoDefault, SpecError

__all__ = ["default_spec", "column_specs", "record_spec", "read_data", "as_fit_input",
           "prepared_input",
           "collect_rows", "FILE_KINDS", "FAR_OVERDISPERSION", "LONG_TEXT_WORDS",
           "TEXT_SAMPLE"]

#: A count column whose variance exceeds its mean this many times is negative binomial: a
#: Poisson's variance is its mean, and a few Poisson segments rarely spread ten times as much.
FAR_OVERDISPERSION = 10.0

#: File suffixes :func:`read_data` reads, and what it makes of them.
FILE_KINDS = {".parquet": "Parquet row groups", ".csv": "CSV chunks", ".npy": "a NumPy array",
              ".jsonl": "JSON lines: objects a DataFrame, numbers or lists an array"}

_KIND_SPEC = {"bool": "bernoulli", "float": "gaussian", "text": "categorical"}
#: Topics of the default topic model of a column of documents.
DEFAULT_TOPICS = 10
#: Mean words per value from which a text column is documents (a topic model), not levels.
LONG_TEXT_WORDS = 8
#: Values read to tell documents from levels.
TEXT_SAMPLE = 1000


def _documents(values: Any) -> bool:
    """Whether a sample of a text column's values are documents: token lists, or long text."""
    seen = [v for v in values if v is not None and not (isinstance(v, float) and v != v)]
    if not seen:
        return False
    if all(isinstance(v, (list, tuple, np.ndarray)) for v in seen):
        return True
    if not all(isinstance(v, str) for v in seen):
        return False
    return sum(len(v.split()) for v in seen) >= LONG_TEXT_WORDS * len(seen)


#: An integer column of at least this many rows, all distinct, is taken for an identifier.
ID_MIN_ROWS = 20


def default_spec(kind: str, *, has_missing: bool = False, min_value: Any = None,
                 name: str = "column", max_value: Any = None, mean: Any = None,
                 variance: Any = None, distinct_rows: int = 0,
                 levels: list[Any] | None = None) -> Any:
    """The spec node for a column of ``kind`` ("bool", "int", "float", "text", "tokens" for
    documents); any other type name gives a :class:`~mixfold.spec.NoDefault` node, which fails
    with a :class:`SpecError` only if the spec uses it (a column the spec names itself may have
    any type). The present
    values' ``min_value``, ``max_value``, ``mean`` and ``variance`` refine it where known. An
    integer column whose ``distinct_rows`` (>= 20) are all distinct is an identifier: a
    :class:`~mixfold.spec.LeftOut` node, which ``"*": "auto"`` skips. A text column's declared
    ``levels`` (a pandas Categorical's categories, used or not) become the categorical's levels.

    >>> default_spec("int", min_value=0), default_spec("int", min_value=-3)
    ('poisson', 'gaussian')
    >>> default_spec("int", min_value=0, mean=4.0, variance=90.0)
    'negative_binomial'
    >>> default_spec("float", min_value=0.02, max_value=0.97)
    'beta'
    >>> default_spec("text", has_missing=True)
    {'optional': 'categorical'}
    >>> default_spec("tokens")
    {'lda': {'n_topics': 10}}
    >>> default_spec("text", levels=["a", "b", "z"])
    {'categorical': {'levels': ['a', 'b', 'z']}}
    """
    if kind == "int" and distinct_rows >= ID_MIN_ROWS and not has_missing:
        return LeftOut(f"column {name!r} looks like an identifier (its {distinct_rows} values "
                       f"are distinct integers): left out; name it in the spec to model it")
    if kind == "int":
        node: Any = "gaussian" if min_value is not None and min_value < 0 else "poisson"
        if node == "poisson" and _far_overdispersed(mean, variance):
            node = "negative_binomial"
    elif kind == "float" and _known(min_value) and _known(max_value) \
            and 0 < min_value and max_value < 1:
        node = "beta"
    elif kind == "tokens":
        node = {"lda": {"n_topics": DEFAULT_TOPICS}}
    elif kind == "text" and levels is not None:
        node = {"categorical": {"levels": list(levels)}}
    elif kind in _KIND_SPEC:
        node = _KIND_SPEC[kind]
    elif kind.startswith(("datetime", "timedelta")):  # no family reads times as they are
        return NoDefault(f"column {name!r} of type {kind} has no default family and no family "
                         f"reads times: convert it to numbers first (e.g. days: "
                         f"(col - col.min()).dt.days) or leave it out of the spec")
    else:
        return NoDefault(f"column {name!r} of type {kind} has no default family: name its "
                         f"family in the spec")
    return {"optional": node} if has_missing else node


def _known(v: Any) -> bool:
    """Whether a column statistic was computed (not None, not NaN)."""
    return v is not None and v == v


def _far_overdispersed(mean: Any, variance: Any) -> bool:
    return _known(mean) and _known(variance) and mean > 0 \
        and variance > FAR_OVERDISPERSION * mean


def _pandas_kind(series: Any) -> str:
    import pandas as pd

    t = pd.api.types
    dtype = series.dtype
    if t.is_bool_dtype(dtype):
        return "bool"
    if t.is_integer_dtype(dtype):
        return "int"
    if t.is_float_dtype(dtype):
        return "float"
    if isinstance(dtype, pd.CategoricalDtype) or t.is_string_dtype(dtype) \
            or t.is_object_dtype(dtype):
        return "text"
    return str(dtype)


def _arrow_kind(pa_type: Any) -> str:
    import pyarrow as pa

    t = pa.types
    if t.is_boolean(pa_type):
        return "bool"
    if t.is_integer(pa_type):
        return "int"
    if t.is_floating(pa_type) or t.is_decimal(pa_type):
        return "float"
    if t.is_string(pa_type) or t.is_large_string(pa_type) or t.is_dictionary(pa_type):
        return "text"
    if (t.is_list(pa_type) or t.is_large_list(pa_type)) and (
            t.is_string(pa_type.value_type) or t.is_large_string(pa_type.value_type)):
        return "tokens"
    return str(pa_type)


def _spark_kind(type_name: str) -> str:
    if type_name == "boolean":
        return "bool"
    if type_name in ("tinyint", "smallint", "int", "bigint", "byte", "short", "integer", "long"):
        return "int"
    if type_name in ("float", "double") or type_name.startswith("decimal"):
        return "float"
    if type_name in ("array<string>", "array<varchar>"):
        return "tokens"
    return "text" if type_name == "string" else type_name


def column_specs(data: Any) -> dict[str, Any]:
    """Column name -> default spec node, for a pandas DataFrame, an Arrow table, a Spark
    DataFrame, a :class:`~mixfold.RowBlocks` source of tables (from its first block), or a
    Parquet / CSV file path (Parquet: from the file metadata, all row groups, and the first
    :data:`TEXT_SAMPLE` values of its text columns in the first row group; CSV: from the first
    chunk; Spark: one aggregate job, and a ``limit(TEXT_SAMPLE)`` sample of its text columns).

    >>> import pandas as pd
    >>> specs = column_specs(pd.DataFrame({"age": [31.5, None], "plan": ["free", "pro"],
    ...                                    "visits": [3, 0], "member": [True, False]}))
    >>> specs["age"], specs["plan"], specs["visits"], specs["member"]
    ({'optional': 'gaussian'}, 'categorical', 'poisson', 'bernoulli')
    """
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if _suffix(path) == ".parquet":
            return _parquet_specs(path)
        return column_specs(read_data(path))
    if isinstance(data, RowBlocks):
        first = next(iter(data.blocks()), None)
        if first is None or len(first) == 0:
            raise ValueError(f"{data.description} has no rows to read column types from")
        return column_specs(first)
    if _is_pandas_frame(data):
        import pandas as pd

        if len(data) == 0:
            raise ValueError(f"no rows to read column types from (columns {list(data.columns)})")
        out = {}
        for name in data.columns:
            col = data[name]
            kind = _pandas_kind(col)
            if kind == "text" and _documents(col.iloc[:TEXT_SAMPLE].tolist()):
                kind = "tokens"
            present = col.dropna()
            if kind == "float" and len(present) < len(col) and _whole_numbers(present):
                kind = "int"  # integers with a blank cell: pandas reads them as floats
            mixed = _mostly_numbers(present, str(name)) if kind == "text" else None
            if mixed is not None:
                out[str(name)] = mixed
                continue
            moments: dict[str, Any] = {}
            if kind in ("int", "float") and len(present):
                moments = {"min_value": present.min(), "max_value": present.max()}
                if kind == "int" and len(present) > 1:
                    moments.update(mean=float(present.mean()), variance=float(present.var()))
            distinct = len(col) if kind == "int" and col.is_unique else 0
            levels = (col.cat.categories.tolist() if kind == "text"
                      and isinstance(col.dtype, pd.CategoricalDtype) else None)
            out[str(name)] = default_spec(kind, has_missing=bool(col.isna().any()),
                                          name=str(name), distinct_rows=distinct,
                                          levels=levels, **moments)
        return out
    if _is_arrow_table(data):
        import pyarrow.compute as pc

        out = {}
        for i, field in enumerate(data.schema):
            col = data.column(i)
            kind = _arrow_kind(field.type)
            if kind == "text" and _documents(col.slice(0, TEXT_SAMPLE).to_pylist()):
                kind = "tokens"
            moments = {}
            if kind in ("int", "float"):
                moments = {"min_value": pc.min(col).as_py(), "max_value": pc.max(col).as_py()}
                if kind == "int":
                    moments.update(mean=pc.mean(col).as_py(),
                                   variance=pc.variance(col, ddof=1).as_py())
            distinct = len(col) if kind == "int" and pc.count_distinct(col).as_py() == len(col) \
                else 0
            out[field.name] = default_spec(kind, has_missing=col.null_count > 0,
                                           name=field.name, distinct_rows=distinct, **moments)
        return out
    if _is_spark_frame(data):
        return _spark_specs(data)
    raise TypeError(f"column types come from a DataFrame, an Arrow table, a RowBlocks source or "
                    f"a Parquet/CSV path, got a {type(data).__name__}")


def _whole_numbers(values: Any) -> bool:
    """Whether every value of a float Series is a whole number (its column: counts)."""
    arr = values.to_numpy(dtype=np.float64)
    return bool(np.isfinite(arr).all() and (arr == np.round(arr)).all())


def _mostly_numbers(present: Any, name: str) -> NoDefault | None:
    """For a text column whose cells are mostly numbers (at least 90%), a node that names the
    cells that are not: a number column with a bad cell, not a categorical one."""
    import pandas as pd

    if not len(present) or not all(isinstance(v, str) for v in present.iloc[:1000]):
        return None
    numbers = pd.to_numeric(present, errors="coerce")
    bad = numbers.isna()
    if bad.all() or bad.mean() > 0.1:
        return None
    rows = ", ".join(f"{i} ({v!r})" for i, v in present[bad].iloc[:5].items())
    return NoDefault(f"column {name!r} is mostly numbers but {int(bad.sum())} row(s) are not: "
                     f"row {rows}; fix those cells, or name the column's family in the spec")


def _parquet_specs(path: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    nulls: dict[str, int] = {}
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    no_range: set[str] = set()  # a row group without a minimum and maximum
    schema = None
    for f in _files(path, ".parquet"):
        pf = pq.ParquetFile(f)
        schema = schema or pf.schema_arrow
        meta = pf.metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for j in range(group.num_columns):
                chunk = group.column(j)
                name = chunk.path_in_schema
                stats = chunk.statistics
                if stats is None or not stats.has_null_count:
                    nulls[name] = nulls.get(name, 0) + 1  # unknown: assume it may be missing
                    no_range.add(name)
                    continue
                nulls[name] = nulls.get(name, 0) + stats.null_count
                if stats.has_min_max and isinstance(stats.min, (int, float, np.number)):
                    lows[name] = min(lows.get(name, stats.min), stats.min)
                    highs[name] = max(highs.get(name, stats.max), stats.max)
                elif group.num_rows > stats.null_count:
                    no_range.add(name)
        pf.close()
    texts = _parquet_documents(path, [f.name for f in schema if _arrow_kind(f.type) == "text"])
    out = {}
    for field in schema:
        name, kind = field.name, _arrow_kind(field.type)
        if name in texts:
            kind = "tokens"
        low = lows.get(name) if kind == "int" or name not in no_range else None
        high = highs.get(name) if name not in no_range else None
        out[name] = default_spec(kind, has_missing=nulls.get(name, 0) > 0, min_value=low,
                                 max_value=high, name=name)
    return out


def _parquet_documents(path: Path, names: list[str]) -> set[str]:
    """The text columns among ``names`` whose first :data:`TEXT_SAMPLE` values (in the first
    non-empty row group, only those columns read) are documents."""
    import pyarrow.parquet as pq

    if not names:
        return set()
    for f in _files(path, ".parquet"):
        with pq.ParquetFile(f) as pf:
            groups = [g for g in range(pf.metadata.num_row_groups)
                      if pf.metadata.row_group(g).num_rows > 0]
            if not groups:
                continue
            batch = next(pf.iter_batches(batch_size=TEXT_SAMPLE, row_groups=groups[:1],
                                         columns=names))
            return {n for n in names if _documents(batch.column(n).to_pylist())}
    return set()


def _spark_specs(frame: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    fields = frame.schema.fields
    kinds = {f.name: _spark_kind(f.dataType.simpleString()) for f in fields}
    aggs = [F.sum(F.col(n).isNull().cast("long")).alias(f"n_{i}") for i, n in enumerate(kinds)]
    numbers = [(i, n) for i, n in enumerate(kinds) if kinds[n] in ("int", "float")]
    aggs += [F.min(F.col(n)).alias(f"m_{i}") for i, n in numbers]
    aggs += [F.max(F.col(n)).alias(f"x_{i}") for i, n in numbers]
    aggs += [f(F.col(n)).alias(f"{tag}_{i}") for i, n in numbers if kinds[n] == "int"
             for tag, f in (("a", F.mean), ("v", F.var_samp))]
    # one job: null counts, ranges of numbers, moments of counts
    row = frame.agg(*aggs).collect()[0].asDict()
    texts = [n for n, k in kinds.items() if k == "text"]
    if texts:  # a bounded sample, one job for all text columns, tells documents from levels
        sample = frame.select(*texts).limit(TEXT_SAMPLE).collect()
        kinds.update({n: "tokens" for j, n in enumerate(texts)
                      if _documents([r[j] for r in sample])})
    return {n: default_spec(k, has_missing=bool(row[f"n_{i}"]), min_value=row.get(f"m_{i}"),
                            max_value=row.get(f"x_{i}"), mean=row.get(f"a_{i}"),
                            variance=row.get(f"v_{i}"), name=n)
            for i, (n, k) in enumerate(kinds.items())}


def _is_spark_frame(x: Any) -> bool:
    cls = type(x)
    return cls.__module__.startswith("pyspark.sql") and cls.__name__ == "DataFrame"


def record_spec(data: Any, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A record spec of every column of ``data`` with its default family, ``overrides``
    (column -> spec node) replacing some; an override of a column the data lacks raises
    :class:`~mixfold.spec.SpecError`.

    >>> import pandas as pd
    >>> record_spec(pd.DataFrame({"x": [1.0, 2.0], "n": [1, 2]}), {"n": "geometric"})
    {'record': {'x': 'gaussian', 'n': 'geometric'}}

    Identifier columns (:func:`default_spec`) are left out unless ``overrides`` names them.
    """
    overrides = dict(overrides or {})
    columns = column_specs(data)
    unknown = [n for n in overrides if n not in columns]
    if unknown:
        raise SpecError(f"unknown column {unknown[0]!r} (the data has {list(columns)})",
                        f"$.record.{unknown[0]}")
    return {"record": {n: overrides.get(n, node) for n, node in columns.items()
                       if n in overrides or not isinstance(node, LeftOut)}}


# ---------------------------------------------------------------------------------------------
# Data by path, and conversion to what ``optimize`` reads


def _suffix(path: Path) -> str:
    if path.is_dir():
        for suffix in (".parquet", ".csv"):
            if next(path.rglob(f"*{suffix}"), None) is not None:
                return suffix
        raise FileNotFoundError(f"no .parquet or .csv files under the folder {str(path)!r}")
    return path.suffix.lower()


def read_data(path: str | os.PathLike, *, columns: list[str] | None = None,
              block_rows: int | None = None) -> RowBlocks | np.ndarray:
    """The rows of a data file (or a folder of Parquet / CSV files).

    Parquet and CSV give a :class:`~mixfold.RowBlocks` source (one row group / ``block_rows``
    rows at a time; ``optimize`` fits it out of core); ``.npy`` a NumPy array (no pickle).

    >>> import numpy as np, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.npy"); np.save(p, np.arange(3.0))
    >>> read_data(p).tolist()
    [0.0, 1.0, 2.0]
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no such file or folder: {str(p)!r}")
    suffix = _suffix(p)
    if suffix == ".parquet":
        return RowBlocks.parquet(p, columns=columns, block_rows=block_rows)
    if suffix == ".csv":
        options = {} if block_rows is None else {"block_rows": block_rows}
        return RowBlocks.csv(p, columns=columns, **options)
    if suffix == ".jsonl":
        return read_json_lines(p)
    if suffix == ".npy":
        return read_npy(p)
    raise ValueError(f"cannot read {str(p)!r}: expected one of {sorted(FILE_KINDS)} "
                     f"({', '.join(FILE_KINDS.values())})")


def read_json_lines(path: str | os.PathLike) -> Any:
    """The rows of a JSON-lines file (one JSON value per line, as ``mixfold sample`` and
    ``mixfold predict --format jsonl`` write): objects become a DataFrame (one column per key,
    ``null`` missing), numbers or lists of numbers a float array, other values a list.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.jsonl")
    >>> _ = open(p, "w").write('[1.0, 2.5]\\n[3.0, null]\\n')
    >>> read_json_lines(p).tolist()
    [[1.0, 2.5], [3.0, nan]]
    """
    rows = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise ValueError(f"{str(path)!r} line {number}: not a JSON value "
                                 f"({err.msg})") from None
    objects = [isinstance(r, dict) for r in rows]
    if any(objects) and not all(objects):
        raise ValueError(f"{str(path)!r}: row {objects.index(not objects[0]) + 1} breaks the "
                         f"rows' kind: every row must be a JSON object, or none")
    if rows and objects[0]:
        import pandas as pd

        return pd.DataFrame(rows)
    try:
        return np.asarray(rows, dtype=np.float64)
    except (TypeError, ValueError):  # text, or sequences of different lengths: rows as read
        return rows


def as_fit_input(data: Any, estimator: Estimator, *, backend: Any = "local") -> Any:
    """``data`` as rows ``optimize`` reads for ``estimator`` on ``backend``
    (:func:`prepared_input`'s rows).

    A data path becomes :func:`read_data`'s source: streamed on the local backend, its rows
    joined in memory for the backends that hold data resident, and under MPI each rank's
    contiguous share of the row blocks (rank order is row order). A table (an Arrow table, a
    pandas DataFrame) stays a DataFrame for named fields and becomes an array of its columns
    for the others; anything else is returned unchanged.

    >>> import pyarrow as pa, mixfold
    >>> as_fit_input(pa.table({"x": [1.0, 2.0]}), mixfold.GaussianEstimator()).tolist()
    [1.0, 2.0]
    """
    return prepared_input(data, kind_of(data), estimator, backend)[0]


def prepared_input(data: Any, kind: Kind, estimator: Estimator,
                   backend: Any = "local") -> tuple[Any, Kind]:
    """:func:`as_fit_input` of ``data`` of ``kind`` (:func:`~mixfold.io.kinds.kind_of`), with
    the kind of what it returns: a path read is a :class:`~mixfold.RowBlocks` source or rows, a
    table rows; any other kind is returned as it is.

    >>> import numpy as np, mixfold
    >>> prepared_input(np.zeros(2), Kind.ROWS, mixfold.GaussianEstimator())[1]
    <Kind.ROWS: 'rows'>
    """
    if kind is Kind.PATH:
        name = backend_name(backend)
        rows = read_data(data)
        if name == "mpi":
            return _rank_share(str(data), rows, estimator, None if isinstance(backend, str)
                               else backend), Kind.ROWS
        if not isinstance(rows, RowBlocks):
            return rows, Kind.ROWS
        if name != "local":
            return collect_rows(rows, estimator.encoder()), Kind.ROWS
        return rows, Kind.ROW_BLOCKS
    if kind is Kind.TABLE:
        layout = "frame" if reads_named_fields(estimator.encoder()) else "array"
        return table_rows(data, layout), Kind.ROWS
    return data, kind


def _rank_share(path: str, rows: Any, estimator: Estimator, comm: Any) -> Any:
    """This MPI rank's contiguous share of ``rows`` (whole row blocks of a source)."""
    if comm is None:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
    if not isinstance(rows, RowBlocks):
        begin, end = shard_bounds(len(rows), comm.size)[min(comm.rank, len(rows) - 1)]
        return rows[begin:end]
    n_blocks = sum(1 for _ in rows.make_blocks())
    if n_blocks < comm.size:
        raise ValueError(f"{path!r} has {n_blocks} row blocks for {comm.size} MPI ranks: write "
                         f"it with more row groups (or read it with fewer ranks)")
    begin, end = shard_bounds(n_blocks, comm.size)[comm.rank]
    mine = RowBlocks.from_factory(
        lambda: (b for i, b in enumerate(rows.make_blocks()) if begin <= i < end))
    return collect_rows(mine, estimator.encoder())


def collect_rows(source: RowBlocks, encoder: Any = None) -> Any:
    """Every block of ``source`` joined in memory (for backends that hold the data resident):
    one DataFrame for table blocks, one array for array blocks, else a list."""
    blocks = list(source.blocks(encoder))
    if not blocks:
        raise ValueError(f"{source.description} has no rows")
    if _is_pandas_frame(blocks[0]):
        import pandas as pd

        return pd.concat(blocks, ignore_index=True)
    if isinstance(blocks[0], np.ndarray):
        return np.concatenate(blocks)
    return [row for block in blocks for row in block]
