"""The command line: ``mixfold fit | score | sample | spec | plan``.

::

    mixfold spec customers.csv --k 3 > spec.json          # a starting spec from the column types
    mixfold fit customers.csv --model spec.json --out model.json
    mixfold fit customers.csv --model spec.json --out - > model.json   # the model on stdout
    mixfold fit data.parquet --model '{"mixture": {"record": {"*": "auto"}}, "k": 3}'
    mixfold score model.json customers.csv
    mixfold sample model.json -n 10
    mixfold plan --model spec.json --resources resources.json --data customers.csv

DATA is a Parquet file or folder (read one row group at a time), a CSV file or folder (read in
chunks) or a ``.npy`` array. On the local backend Parquet and CSV are fitted out of core; the
other backends hold the data resident, so it is read into memory first (under
``mpiexec -n N mixfold fit ... --backend mpi`` each rank reads its own share of the row blocks, and
rank 0 prints the trace and writes the model). SPEC is a model spec
(:mod:`mixfold.spec`) as a JSON or YAML file or inline JSON. Bad input (an unreadable file, a bad
spec, an unknown column) prints one line, ``mixfold: error: ...``, and exits with status 1.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from functools import wraps
from pathlib import Path
from typing import Any

import click
import numpy as np

import mixfold
from mixfold.backends import BACKENDS
from mixfold.errors import ModelFileError
from mixfold.families._protocol import Distribution, Estimator
from mixfold.io.model_files import FORMAT, model_document, model_from_document
from mixfold.io.readers import RowBlocks
from mixfold.io.tables import as_fit_input, column_specs, read_data
from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous
from mixfold.parallel.model_decomposition import decompose_model
from mixfold.parallel.resources import Resources
from mixfold.plots import plot_plan_timeline
from mixfold.precision import BANDS, resolve_precision
from mixfold.spec import estimator_from_spec, load_spec

__all__ = ["main", "CLIError"]

#: Errors that mean bad input, reported as one line; anything else is a bug and keeps its trace.
_USER_ERRORS = (ValueError, TypeError, KeyError, OSError, ImportError, ArithmeticError)


class CLIError(click.ClickException):
    """A one-line error: ``mixfold: error: <message>``, exit status 1."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))

    def show(self, file: Any = None) -> None:
        click.echo(f"mixfold: error: {self.format_message()}", err=True)


def _one_line(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    if isinstance(err, KeyError):
        text = f"missing key {text}"
    return " ".join(text.split())


def _checked_precision(value: str) -> str:
    """``--precision`` as a precision name, or a usage error saying what is accepted."""
    try:
        return str(resolve_precision(value))
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _reports_bad_input(command: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except click.ClickException:
            raise
        except _USER_ERRORS as err:
            raise CLIError(_one_line(err)) from None

    return run


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(mixfold.__version__, prog_name="mixfold")
def main() -> None:
    """Fit probabilistic models of heterogeneous data by EM, from one core to a cluster."""


# ---------------------------------------------------------------------------------------------
# Reading inputs


def _mpi_comm() -> Any:
    from mpi4py import MPI

    return MPI.COMM_WORLD


def _columns_of(path: str) -> dict[str, Any] | None:
    """Default spec nodes of DATA's columns (None for an array file)."""
    if Path(path).suffix.lower() == ".npy":
        return None
    return column_specs(path)


def _estimator(spec_source: str, data_path: str | None) -> Estimator:
    spec = load_spec(spec_source)
    return estimator_from_spec(spec, None if data_path is None else _columns_of(data_path))


def _load_model(path: str) -> Distribution:
    try:
        return mixfold.load(path)
    except FileNotFoundError:
        raise CLIError(f"no such model file: {path!r}") from None
    except ModelFileError as err:
        raise CLIError(str(err)) from None


def _blocks(data: Any, model: Distribution) -> Iterator[Any]:
    if isinstance(data, RowBlocks):
        yield from data.blocks(model.encoder())
    else:
        yield data


# ---------------------------------------------------------------------------------------------
# fit


@main.command()
@click.argument("data", type=click.Path(dir_okay=True))
@click.option("--model", "spec", required=True, metavar="SPEC",
              help="Model spec: a JSON/YAML file or inline JSON.")
@click.option("--backend", type=click.Choice(BACKENDS), default="local", show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Workers for the mp, spark, dask and ray backends.")
@click.option("--precision", default="float64", show_default=True, metavar="BAND[@DEVICE]",
              callback=lambda _ctx, _param, value: _checked_precision(value),
              help=f"Precision of the E-step: a band ({', '.join(BANDS)}), on a torch device "
                   f"('bfloat16@cuda', 'float32@cpu') or on the emulator, the accuracy "
                   f"reference ('bfloat16@emulated'); statistics are always float64.")
@click.option("--max-iter", type=click.IntRange(min=0), default=100, show_default=True)
@click.option("--tol", type=click.FloatRange(min=0), default=1e-6, show_default=True,
              help="Stop when the relative change of the mean log-likelihood is below this.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, writable=True, allow_dash=True),
              default="model.json", show_default=True,
              help="Where to write the fitted model (JSON); '-' writes it to standard output.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar on stderr (default: when stderr is a terminal).")
@_reports_bad_input
def fit(data: str, spec: str, backend: str, workers: int | None, precision: str, max_iter: int,
        tol: float, seed: int, out: str, progress: bool | None) -> None:
    """Fit the model SPEC to DATA by EM and write the fitted model as JSON."""
    folder = Path(os.path.realpath(out)).parent
    if out != "-" and not folder.is_dir():  # before the fit, not after it
        raise CLIError(f"--out {out!r}: the folder {str(folder)!r} does not exist")
    estimator = _estimator(spec, data)
    rows = as_fit_input(data, estimator, backend=backend)
    if progress is None:
        progress = sys.stderr.isatty()
    if backend == "mpi":
        progress = progress and _mpi_comm().rank == 0
    with click.progressbar(length=max(max_iter, 1), label="EM", file=sys.stderr,
                           hidden=not progress, show_pos=True,
                           item_show_func=lambda ll: None if ll is None else f"{ll:.8g}"
                           ) as bar:

        def advance(info: mixfold.IterationInfo) -> None:
            bar.update(1, info.log_likelihood)

        result = mixfold.fit(rows, estimator, backend=backend, num_workers=workers,
                             precision=precision, max_iter=max_iter, tol=tol, seed=seed,
                             progress=False, callbacks=[advance])
    if backend == "mpi" and _mpi_comm().rank != 0:
        return  # every rank holds the same model: rank 0 reports and writes it
    to_stdout = out == "-"
    report = to_stdout  # the model owns standard output: the trace goes to stderr
    click.echo(f"{'iteration':>9}  {'mean log-likelihood':>20}  {'change':>11}  {'seconds':>8}",
               err=report)
    previous = None
    for i, (ll, s) in enumerate(zip(result.log_likelihood, result.seconds)):
        change = "" if previous is None else f"{ll - previous:+.3e}"
        click.echo(f"{i:>9}  {ll:>20.10g}  {change:>11}  {s:>8.3f}", err=report)
        previous = ll
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if to_stdout:
        click.echo(json.dumps(model_document(result.model), allow_nan=False, indent=1))
    else:
        mixfold.save(result.model, out)
    click.echo(f"{result.stop_reason} after {result.iterations} iterations on {result.n_rows} "
               f"rows ({result.backend}, {result.precision}); model written to "
               f"{'standard output' if to_stdout else out}", err=report)


# ---------------------------------------------------------------------------------------------
# score and sample


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.argument("data", type=click.Path(dir_okay=True))
@click.option("--per-row", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Also write every row's log-density, one per line.")
@_reports_bad_input
def score(model_path: str, data: str, per_row: str | None) -> None:
    """Log-likelihood of DATA under the fitted MODEL (read block by block)."""
    model = _load_model(model_path)
    source = read_data(data)
    n, total = 0, 0.0
    sink = open(per_row, "w") if per_row else None  # noqa: SIM115 - closed below
    try:
        for block in _blocks(source, model):
            start = n
            encoder = model.encoder()
            try:
                scores = model.seq_log_density(encoder.encode(block))
            except mixfold.DataError as err:
                row = None if err.row is None else start + err.row
                raise CLIError(str(err.within(row=row))) from None
            n += scores.size
            total += float(scores.sum())
            if sink is not None:
                np.savetxt(sink, scores, fmt="%.17g")
    finally:
        if sink is not None:
            sink.close()
    if n == 0:
        raise CLIError(f"{data!r} has no rows")
    click.echo(f"rows {n}  total log-likelihood {total:.10g}  mean {total / n:.10g}")


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("-n", "count", type=click.IntRange(min=0), default=10, show_default=True,
              help="How many rows to draw.")
@click.option("--seed", type=click.IntRange(min=0), default=None, help="Random seed.")
@click.option("--length", type=click.IntRange(min=0), default=None,
              help="Sequence / hidden Markov models: draw sequences of exactly this length.")
@_reports_bad_input
def sample(model_path: str, count: int, seed: int | None, length: int | None) -> None:
    """Draw rows from the fitted MODEL, one JSON value per line."""
    model = _load_model(model_path)
    if length is None:
        sampler = model.sampler(seed)
    else:
        try:
            sampler = model.sampler(seed, sample_length=length)
        except TypeError:
            raise CLIError(f"--length applies to sequence and hidden Markov models, not to a "
                           f"{type(model).__name__}") from None
    for row in sampler.sample(count):
        click.echo(json.dumps(_jsonable(row)))


# ---------------------------------------------------------------------------------------------
# spec


@main.command("spec")
@click.argument("data", type=click.Path(dir_okay=True))
@click.option("--k", type=click.IntRange(min=1), default=None,
              help="Wrap the record in a mixture of K components.")
@_reports_bad_input
def spec_command(data: str, k: int | None) -> None:
    """Print a spec with each column of DATA given the family its type suggests."""
    columns = column_specs(data)
    bad = {n: node for n, node in columns.items() if not isinstance(node, (str, dict))}
    if bad:
        name = next(iter(bad))
        raise CLIError(f"{bad[name].message} (or drop the column)")
    node: dict[str, Any] = {"record": columns}
    if k is not None:
        node = {"mixture": node, "k": k, "pseudo_count": 1.0}
    click.echo(json.dumps(node, indent=2))


# ---------------------------------------------------------------------------------------------
# plan


def _model_for_plan(model_arg: str, data: str | None) -> tuple[Distribution, int | None]:
    """A model to plan for and the data's row count (when DATA says it).

    A fitted model file is used as it is. A spec is sized by DATA when given (its seeded
    starting model on the first block: real vocabularies and dimensions), else by the spec alone
    (categorical levels and vector dimensions must then be written in it).
    """
    path = Path(model_arg)
    if path.suffix.lower() == ".json" and path.is_file():
        doc = json.loads(path.read_text())
        if isinstance(doc, dict) and doc.get("format") == FORMAT:
            return model_from_document(doc, str(path)), None
    estimator = _estimator(model_arg, data)
    if data is None:
        try:
            empty = estimator.accumulator_factory().make()
            return estimator.estimate(0.0, empty.value()), None
        except (ValueError, TypeError) as err:
            raise CLIError(f"the spec leaves a size open ({_one_line(err)}): give --data, or "
                           f"write the categorical levels and vector dims in the spec") from None
    source = read_data(data)
    first = next(iter(source.blocks(estimator.encoder()))) if isinstance(source, RowBlocks) \
        else source
    start = mixfold.fit(first, estimator, max_iter=0, progress=False).model
    if not isinstance(source, RowBlocks):
        return start, len(source)
    if source.n_rows is not None:
        return start, source.n_rows
    return start, sum(len(block) for block in source.blocks())  # a CSV: one counting pass


@main.command()
@click.option("--model", "model_arg", required=True, metavar="SPEC|MODEL",
              help="A model spec, or a fitted model file.")
@click.option("--resources", "resources_path", required=True,
              type=click.Path(exists=True, dir_okay=False),
              help="Devices as JSON (mixfold.parallel.resources.Resources.to_json).")
@click.option("--data", type=click.Path(dir_okay=True), default=None,
              help="Data that sizes the spec (levels, dimensions) and gives the row count.")
@click.option("--rows", type=click.IntRange(min=1), default=None,
              help="Rows to plan for (default: DATA's row count, else 1,000,000).")
@click.option("--target-rel-error", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Accuracy budget of the precision plan (default: none).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True),
              default=None, help="Also draw the planned per-worker timeline (needs matplotlib).")
@_reports_bad_input
def plan(model_arg: str, resources_path: str, data: str | None, rows: int | None,
         target_rel_error: float | None, plot_path: str | None) -> None:
    """Print the model decomposition and the heterogeneous (rows and precision) plan."""
    try:
        resources = Resources.from_json(Path(resources_path).read_text())
    except (ValueError, KeyError, TypeError) as err:
        raise CLIError(f"{resources_path!r} is not a resources description: "
                       f"{_one_line(err)}") from None
    model, data_rows = _model_for_plan(model_arg, data)
    n_rows = rows or data_rows or 1_000_000
    decomposition = decompose_model(model, resources, n_data=n_rows)
    click.echo(f"model decomposition for {n_rows} rows on {len(resources.devices)} devices")
    click.echo(decomposition.describe())
    workers = [Worker.from_device(d) for d in resources.devices]  # calibrated rates kept
    hetero = plan_heterogeneous(workers, n_rows, target_rel_error=target_rel_error)
    measured = [b for b in BANDS if any(b in d.band_throughput for d in resources.devices)]
    if measured:
        click.echo("")
        click.echo("measured rows per second (Resources.calibrate; - not measured)")
        click.echo(_table(["device"] + measured,
                          [[d.name] + [f"{d.band_throughput[b]:.4g}" if b in d.band_throughput
                                       else "-" for b in measured] for d in resources.devices]))
    click.echo("")
    click.echo(f"heterogeneous plan (tree-reduce depth {hetero.reduce_depth})")
    click.echo(_table(["worker", "rows", "precision", "throughput"],
                      [[a.name, a.rows, a.precision, f"{a.effective_throughput:.4g}"]
                       for a in hetero.assignments]))
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        # planned time of a worker: its rows over its throughput (relative units unless the
        # resources were calibrated)
        spans = [(a.name, 0.0, a.rows / a.effective_throughput) for a in hetero.assignments
                 if a.effective_throughput > 0]
        plot_plan_timeline(spans).figure.savefig(plot_path)
        click.echo(f"timeline written to {plot_path}")


def _table(header: list[str], rows: list[list[Any]]) -> str:
    """Columns padded to their widest cell; numbers right-aligned.

    >>> print(_table(["name", "rows"], [["cpu:0", 10], ["gpu:0", 1000]]))
    name   rows
    cpu:0    10
    gpu:0  1000
    """
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    numeric = [all(isinstance(r[i], (int, float)) for r in rows) for i in range(len(header))]
    lines = []
    for r in cells:
        lines.append("  ".join(c.rjust(w) if num else c.ljust(w)
                               for c, w, num in zip(r, widths, numeric)).rstrip())
    return "\n".join(lines)


if __name__ == "__main__":
    main()
