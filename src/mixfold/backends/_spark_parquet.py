"""A Spark DataFrame that is a bare Parquet scan, read by pyarrow in the Python tasks.

When a DataFrame's optimized plan is a Parquet relation, at most under a projection of its
columns (no filter, no partition or bucket columns), and every file is local and read whole by
one task, a partition's rows are its files' rows, file after file in the order Spark's scan
lists them: an encoding task reads those files itself with pyarrow, skipping the JVM's
conversion of the rows into Arrow batches, and the rows keep the DataFrame's order (the
seeded start and row indices depend on it). Anything else — a filter, a split file, a column
whose Parquet type is not the Arrow type Spark gives it, a date or timestamp — returns None from
:func:`parquet_scan`, and the encode reads the JVM's Arrow batches instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote, urlparse

__all__ = ["parquet_scan", "parquet_tables"]


def _scala_seq(seq: Any) -> list[Any]:
    return [seq.apply(i) for i in range(seq.size())]


def _simple_name(obj: Any) -> str:
    return str(obj.getClass().getSimpleName())


def _bare_relation(plan: Any) -> bool:
    """Whether an optimized logical plan is a Parquet relation with no partition or bucket
    columns, under at most a projection of plain columns."""
    if _simple_name(plan) == "Project":
        if any(_simple_name(e) != "AttributeReference" for e in _scala_seq(plan.projectList())):
            return False
        plan = plan.child()
    if _simple_name(plan) != "LogicalRelation":
        return False
    relation = plan.relation()
    return (_simple_name(relation) == "HadoopFsRelation"
            and _simple_name(relation.fileFormat()) == "ParquetFileFormat"
            and relation.partitionSchema().length() == 0 and relation.bucketSpec().isEmpty())


def _local_path(uri: str) -> str | None:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def _partition_files(df: Any) -> list[list[str]] | None:
    """Each partition's local files in the order its task reads them, or None where a file
    is split between tasks or not on the local file system."""
    leaves = _scala_seq(df._jdf.queryExecution().executedPlan().collectLeaves())
    if len(leaves) != 1 or _simple_name(leaves[0]) != "FileSourceScanExec":
        return None
    out = []
    for partition in _scala_seq(leaves[0].inputRDD().filePartitions()):
        files = []
        for f in partition.files():
            path = _local_path(str(f.filePath().toPath().toUri().toString()))
            if path is None or f.start() != 0 or f.length() != f.fileSize():
                return None
            files.append(path)
        out.append(files)
    return out


def _same_values(held: Any, wanted: Any) -> bool:
    """Whether a Parquet column read by pyarrow as ``held`` holds the values Spark gives as
    ``wanted`` (Arrow types; strings and binaries of either offset width cast losslessly)."""
    import pyarrow as pa

    if _has_dates(wanted):  # Spark may rebase old dates written by legacy writers; pyarrow not
        return False
    widths = ({pa.string(), pa.large_string()}, {pa.binary(), pa.large_binary()})
    return held == wanted or any(held in pair and wanted in pair for pair in widths)


def _has_dates(kind: Any) -> bool:
    """Whether an Arrow type is or holds a date, time or timestamp."""
    import pyarrow as pa

    if pa.types.is_temporal(kind):
        return True
    return any(_has_dates(kind.field(i).type) for i in range(kind.num_fields))


def _same_types(paths: list[str], schema: Any) -> bool:
    """Whether every file holds every column of ``schema`` under its name, with its values."""
    import pyarrow.parquet as pq

    for path in paths:
        held = pq.read_schema(path)
        for field in schema:
            index = held.get_field_index(field.name)
            if index < 0 or not _same_values(held.field(index).type, field.type):
                return False
    return True


def parquet_scan(df: Any, schema: Any) -> list[list[str]] | None:
    """Each partition's local Parquet files, in the order Spark's scan reads them, where
    ``df`` is a bare Parquet scan whose files hold its columns in the Arrow types of
    ``schema`` (Spark's for ``df``); None otherwise."""
    if not _bare_relation(df._jdf.queryExecution().optimizedPlan()):
        return None
    files = _partition_files(df)
    if files is None or not _same_types(sorted({p for f in files for p in f}), schema):
        return None
    return files


def parquet_tables(schema: Any, batch_rows: int, paths: list[str]) -> Iterator[Any]:
    """The columns of ``schema`` (Spark's Arrow schema) read from the files ``paths``, in
    order, as Arrow tables of at most ``batch_rows`` rows (one row group in memory at a
    time)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = list(schema.names)
    for path in paths:
        # one thread: a task has the cores Spark gave it
        for batch in pq.ParquetFile(path).iter_batches(batch_size=batch_rows, columns=names,
                                                       use_threads=False):
            # the schema Spark gives, without pandas' metadata (the writer's dtypes and index)
            table = pa.Table.from_batches([batch]).select(names).replace_schema_metadata(None)
            yield table if table.schema == schema else table.cast(schema)
