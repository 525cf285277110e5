"""Row blocks: a re-iterable source of raw rows read one block at a time (data larger than memory).

``optimize`` folds a :class:`RowBlocks` source out of core: every EM iteration is one pass that
reads, encodes, folds and drops each block, so memory is bounded by the block size. A source
must yield the same rows in the same order on every pass; :meth:`RowBlocks.blocks` starts a new
pass each time it is called.

Blocks are raw rows in the format the estimator's encoder reads (an array of floats, a list of
tuples or dicts, a pandas DataFrame for records). Table blocks (Parquet row groups, CSV chunks, or
DataFrames / Arrow tables from a factory) are turned into that format by the source's ``layout``:

- ``"frame"``: a pandas DataFrame (what a Record estimator reads: one field per column);
- ``"array"``: a NumPy array: one column gives the 1-D column (a scalar family), several columns
  a 2-D array of shape (n_rows, n_columns), float64 when every column is numeric, else of objects
  (a vector family such as DiagonalGaussian, or a Composite of the columns in order);
- ``"auto"`` (the default): ``"frame"`` when the estimator reads named fields (a Record, a mixture
  of Records), else ``"array"``.

pyarrow and pandas are imported only when a Parquet or CSV source is read.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from mixfold.families._protocol import Encoder
from mixfold.families.composite import RecordEncoder
from mixfold.families.units import SharedEncoder

__all__ = ["RowBlocks", "LAYOUTS", "DEFAULT_BLOCK_ROWS", "table_rows", "reads_named_fields",
           "read_npy"]

#: How table blocks become raw rows (see the module docstring).
LAYOUTS = ("auto", "frame", "array")
#: Rows per block of a CSV source (and of ``from_array`` when no size is given).
DEFAULT_BLOCK_ROWS = 100_000


def _check_block_rows(block_rows: Any, allow_none: bool) -> int | None:
    if block_rows is None and allow_none:
        return None
    if isinstance(block_rows, (int, np.integer)) and not isinstance(block_rows, bool) \
            and block_rows >= 1:
        return int(block_rows)
    expected = "None or an integer >= 1" if allow_none else "an integer >= 1"
    raise ValueError(f"block_rows must be {expected}, got {block_rows!r}")


def _check_layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {layout!r}")
    return layout


def _files(path: str | os.PathLike, suffix: str) -> list[Path]:
    """``path`` itself, or every ``*suffix`` file below the folder ``path`` in sorted order."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob(f"*{suffix}") if f.is_file())
        if not files:
            raise FileNotFoundError(f"no {suffix} files under the folder {str(p)!r}")
        return files
    if not p.exists():
        raise FileNotFoundError(f"no such file or folder: {str(p)!r}")
    return [p]


class RowBlocks:
    """A re-iterable source of row blocks; each :meth:`blocks` call is one fresh pass.

    ``optimize`` fits such a source out of core on the local backend (one pass per iteration,
    one block in memory at a time); :class:`~mixfold.OnlineEM` streams it. Build one with
    :meth:`parquet`, :meth:`csv`, :meth:`from_factory` or :meth:`from_array`.

    Parameters
    ----------
    make_blocks : callable
        Returns a new iterable of blocks on every call.
    n_rows : int, default=None
        The total row count when the source knows it up front (Parquet metadata).
    layout : str, default="auto"
        How table blocks become rows (module docstring); other blocks pass through unchanged.
    description : str, default="row blocks"
        What the source is, for messages.

    Examples
    --------
    >>> import numpy as np
    >>> source = RowBlocks.from_array(np.arange(10.0), block_rows=4)
    >>> [b.tolist() for b in source.blocks()]
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
    >>> source.n_rows
    10
    """

    def __init__(self, make_blocks: Callable[[], Iterable[Any]], *, n_rows: int | None = None,
                 layout: str = "auto", description: str = "row blocks"):
        if not callable(make_blocks):
            raise TypeError(f"make_blocks must be a callable returning an iterable of blocks, "
                            f"got a {type(make_blocks).__name__}")
        self.make_blocks = make_blocks
        self.n_rows = None if n_rows is None else int(n_rows)
        self.layout = _check_layout(layout)
        self.description = description

    def blocks(self, encoder: Encoder | None = None) -> Iterator[Any]:
        """One pass over the source: the blocks as raw rows for ``encoder`` (see ``layout``).

        Without an encoder, ``layout="auto"`` gives table blocks as pandas DataFrames.
        """
        layout = self.layout
        if layout == "auto":
            layout = "array" if encoder is not None and not reads_named_fields(encoder) \
                else "frame"
        blocks = self.make_blocks()
        if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Iterable):
            raise TypeError(f"the block factory of {self.description} must return an iterable "
                            f"of blocks, got a {type(blocks).__name__}")
        for block in blocks:
            rows = table_rows(block, layout)
            del block  # hold one block, not two, while the consumer works on it
            yield rows
            del rows

    def __iter__(self) -> Iterator[Any]:
        return self.blocks()

    def __repr__(self) -> str:
        size = "" if self.n_rows is None else f", n_rows={self.n_rows}"
        return f"RowBlocks({self.description}{size}, layout={self.layout!r})"

    # --- constructors ---

    @classmethod
    def parquet(cls, path: str | os.PathLike, *, columns: Sequence[str] | None = None,
                block_rows: int | None = None, layout: str = "auto") -> RowBlocks:
        """A Parquet file, or every ``*.parquet`` file below a folder (sorted by path).

        One block per row group (``block_rows=None``), or batches of at most ``block_rows``
        rows read from one row group at a time; never the whole file. ``columns`` selects and
        orders the columns (all by default). The row count comes from the file metadata.
        """
        import pyarrow.parquet as pq

        files = _files(path, ".parquet")
        block_rows = _check_block_rows(block_rows, allow_none=True)
        cols = None if columns is None else list(columns)
        n_rows = 0
        for f in files:
            n_rows += pq.ParquetFile(f).metadata.num_rows

        def read_blocks() -> Iterator[Any]:
            for f in files:
                pf = pq.ParquetFile(f)
                try:
                    if block_rows is None:
                        for i in range(pf.num_row_groups):
                            yield pf.read_row_group(i, columns=cols)
                    else:
                        yield from pf.iter_batches(batch_size=block_rows, columns=cols)
                finally:
                    pf.close()

        return cls(read_blocks, n_rows=n_rows, layout=layout,
                   description=f"Parquet {str(path)!r}")

    @classmethod
    def csv(cls, path: str | os.PathLike, *, block_rows: int = DEFAULT_BLOCK_ROWS,
            columns: Sequence[str] | None = None, layout: str = "auto",
            **read_csv_options: Any) -> RowBlocks:
        """A CSV file, or every ``*.csv`` file below a folder (sorted by path), in chunks.

        Read with ``pandas.read_csv(chunksize=block_rows, usecols=columns, **read_csv_options)``.
        pandas infers column types chunk by chunk: give ``dtype=`` when a column's type could
        differ between chunks (codes that look numeric in one chunk, text in another). The row
        count is not known until the first pass.
        """
        import pandas as pd

        files = _files(path, ".csv")
        block_rows = _check_block_rows(block_rows, allow_none=False)
        cols = None if columns is None else list(columns)

        def read_blocks() -> Iterator[Any]:
            for f in files:
                try:
                    reader = pd.read_csv(f, chunksize=block_rows, usecols=cols,
                                         **read_csv_options)
                except pd.errors.EmptyDataError:
                    raise ValueError(f"{str(f)!r}: the CSV file is empty (no header, no rows)") \
                        from None
                with reader as chunks:
                    for chunk in chunks:
                        yield chunk if cols is None else chunk[cols]

        return cls(read_blocks, layout=layout, description=f"CSV {str(path)!r}")

    @classmethod
    def from_factory(cls, make_blocks: Callable[[], Iterable[Any]], *, n_rows: int | None = None,
                     layout: str = "auto") -> RowBlocks:
        """Blocks from ``make_blocks()``, called once per pass (a generator function, say).

        >>> import numpy as np
        >>> def blocks():
        ...     for i in range(3):
        ...         yield np.random.default_rng(i).normal(size=5)
        >>> [len(b) for b in RowBlocks.from_factory(blocks)]
        [5, 5, 5]
        """
        name = getattr(make_blocks, "__name__", type(make_blocks).__name__)
        return cls(make_blocks, n_rows=n_rows, layout=layout, description=f"factory {name}")

    @classmethod
    def from_array(cls, rows: Any, block_rows: int = DEFAULT_BLOCK_ROWS, *,
                   layout: str = "auto") -> RowBlocks:
        """Rows held in memory (an array, a list, a DataFrame), split into blocks of
        ``block_rows`` (views where the type allows; for tests and for online EM)."""
        block_rows = _check_block_rows(block_rows, allow_none=False)
        n = len(rows)
        take = rows.iloc.__getitem__ if _is_pandas_frame(rows) else rows.__getitem__

        def read_blocks() -> Iterator[Any]:
            for begin in range(0, n, block_rows):
                yield take(slice(begin, min(begin + block_rows, n)))

        return cls(read_blocks, n_rows=n, layout=layout,
                   description=f"{type(rows).__name__} of {n} rows")


# ---------------------------------------------------------------------------------------------
# Table blocks -> raw rows


def _is_pandas_frame(x: Any) -> bool:
    cls = type(x)
    return cls.__module__.startswith("pandas") and cls.__name__ == "DataFrame"


def _is_arrow_table(x: Any) -> bool:
    cls = type(x)
    return cls.__module__.startswith("pyarrow") and cls.__name__ in ("Table", "RecordBatch")


def reads_named_fields(encoder: Encoder) -> bool:
    """Whether ``encoder`` reads rows by field name (a Record, or a mixture of Records)."""
    if isinstance(encoder, RecordEncoder):
        return True
    if isinstance(encoder, SharedEncoder):
        return any(reads_named_fields(e) for e in encoder.encoders)
    return False


#: Rows per step of :func:`numeric_rows`: the columns' slices stay in cache while they are
#: interleaved into rows.
ROW_COPY_STEP = 8192


def numeric_rows(columns: Sequence[np.ndarray]) -> np.ndarray:
    """Numeric columns as rows: a C-ordered float64 array (n_rows, n_columns), copied in steps
    of :data:`ROW_COPY_STEP` rows.

    >>> numeric_rows([np.arange(3), np.array([0.5, 1.5, 2.5])]).tolist()
    [[0.0, 0.5], [1.0, 1.5], [2.0, 2.5]]
    """
    n = len(columns[0])
    out = np.empty((n, len(columns)))
    for lo in range(0, n, ROW_COPY_STEP):
        hi = min(n, lo + ROW_COPY_STEP)
        for j, column in enumerate(columns):
            out[lo:hi, j] = column[lo:hi]
    return out


def table_rows(block: Any, layout: str) -> Any:
    """A table block (pandas DataFrame, Arrow Table or RecordBatch) as raw rows in ``layout``
    (``"frame"`` or ``"array"``); any other block unchanged.

    >>> import numpy as np
    >>> table_rows(np.ones(3), "array").tolist()
    [1.0, 1.0, 1.0]
    """
    arrow = _is_arrow_table(block)
    if not (arrow or _is_pandas_frame(block)):
        return block
    if layout == "frame":
        return block.to_pandas() if arrow else block
    if arrow:
        columns = [block.column(i).to_numpy(zero_copy_only=False)
                   for i in range(block.num_columns)]
    else:
        columns = [block.iloc[:, i].to_numpy() for i in range(block.shape[1])]
    if not columns:
        raise ValueError("a table block with no columns has no values to fit")
    if len(columns) == 1:
        return columns[0]
    if all(c.dtype.kind in "iufb" for c in columns):
        return numeric_rows(columns)
    out = np.empty((len(columns[0]), len(columns)), dtype=object)
    for i, c in enumerate(columns):
        out[:, i] = c
    return out


_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0}


def read_npy(path: str | os.PathLike) -> np.ndarray:
    """The array in a ``.npy`` file, its header checked against the file's size before anything
    is allocated (a header may declare 10^11 values in a file of a few bytes); never unpickled.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.npy"); np.save(p, np.arange(3.0))
    >>> read_npy(p).tolist()
    [0.0, 1.0, 2.0]
    >>> with open(p, "r+b") as fh:
    ...     _ = fh.seek(0); head = fh.read(128)
    ...     _ = fh.seek(0); _ = fh.write(head.replace(b"(3,)", b"(9,)"))
    >>> read_npy(p)
    Traceback (most recent call last):
    ...
    ValueError: '...x.npy' is not a readable .npy array: its header declares shape (9,) of ...
    """
    where = repr(str(path))
    with open(path, "rb") as fh:
        try:
            version = np.lib.format.read_magic(fh)
            read_header = _NPY_HEADERS.get(version)
            if read_header is None:
                raise ValueError(f"format version {version} (this mixfold reads 1.0 and 2.0)")
            shape, fortran, dtype = read_header(fh)
        except (ValueError, SyntaxError, TypeError, OverflowError) as err:
            raise ValueError(f"{where} is not a readable .npy array: {' '.join(str(err).split())}"
                             ) from None
        if dtype.hasobject:
            raise ValueError(f"{where} is not a readable .npy array: it holds Python objects "
                             f"(dtype {dtype}), which would need unpickling")
        declared = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
        held = os.fstat(fh.fileno()).st_size - fh.tell()
        if declared != held:
            raise ValueError(f"{where} is not a readable .npy array: its header declares shape "
                             f"{tuple(shape)} of {dtype} ({declared} bytes of values), the file "
                             f"holds {held}")
        values = np.fromfile(fh, dtype=dtype, count=math.prod(shape))
    return values.reshape(shape, order="F" if fortran else "C")
