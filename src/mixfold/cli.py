"""The command line: ``mixfold fit | score | predict | sample | select | spec | plan``.

::

    mixfold spec customers.csv --k 3 > spec.json          # a starting spec from the column types
    mixfold fit customers.csv --model spec.json --out model.json
    mixfold fit customers.csv --model spec.json --out - > model.json   # the model on stdout
    mixfold fit data.parquet --model '{"mixture": {"record": {"*": "auto"}}, "k": 3}'
    mixfold score model.json customers.csv
    mixfold predict model.json customers.csv --out labels.csv   # most likely component per row
    mixfold select customers.csv --model spec.json --k 1-6      # BIC and AIC for each K
    mixfold sample model.json -n 10
    mixfold plan --model spec.json --resources resources.json --data customers.csv

DATA is a Parquet file or folder (read one row group at a time), a CSV file or folder (read in
chunks) or a ``.npy`` array. On the local backend Parquet and CSV are fitted out of core; the
other backends hold the data resident, so it is read into memory first (under
``mpiexec -n N mixfold fit ... --backend mpi`` each rank reads its own share of the row blocks, and
rank 0 prints the trace and writes the model). SPEC is a model spec
(:mod:`mixfold.spec`) as a JSON or YAML file or inline JSON. Bad input (an unreadable file, a bad
spec, an unknown column) prints one line, ``mixfold: error: ...``, and exits with status 1.

Every file a command writes (``--out``, ``--per-row``, ``--plot``) is written beside its target
and renamed into place only when complete (a failure on a later block leaves the old file); a
target that is one of the inputs (the same file, by device and inode) or whose folder is missing
or not writable is refused before any fitting or scoring. Model files larger than 64 MiB are
read with ``--max-model-bytes``.
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Any

import click
import numpy as np

import mixfold
from mixfold.backends import BACKENDS
from mixfold.errors import DegenerateFitWarning, EMDecreaseWarning, ModelFileError
from mixfold.families import HiddenMarkovDistribution, MixtureDistribution, RecordDistribution
from mixfold.families.composite import records_log_densities
from mixfold.families._protocol import Distribution, Estimator
from mixfold.io.model_files import (FORMAT, MAX_FILE_BYTES, model_document,
                                    model_from_document, read_json_bounded)
from mixfold.io.outputs import atomic_output, check_destination
from mixfold.io.readers import RowBlocks, _is_pandas_frame
from mixfold.io.tables import as_fit_input, column_specs, read_data
from mixfold.parallel.heterogeneous import Worker, plan_heterogeneous
from mixfold.parallel.model_decomposition import decompose_model
from mixfold.parallel.resources import Resources
from mixfold.plots import plot_plan_timeline
from mixfold.plots import plot_model_selection
from mixfold.precision import BANDS, Engine, Precision, resolve_precision
from mixfold.precision.gpu import torch_device_available
from mixfold.spec import LeftOut, estimator_from_spec, load_spec

__all__ = ["main", "CLIError"]

#: The exit status of a command whose reader closed the pipe: a shell's for death by SIGPIPE.
BROKEN_PIPE_STATUS = 128 + 13

#: Errors that mean bad input, reported as one line; anything else is a bug and keeps its trace.
_USER_ERRORS = (ValueError, TypeError, KeyError, OSError, ImportError, ArithmeticError)

#: Rows ``sample`` draws at a time: one block is held in memory, whatever ``-n`` is.
SAMPLE_BLOCK_ROWS = 10_000
#: Longest sequence ``sample --length`` draws: a sequence is one line, held whole in memory.
MAX_SAMPLE_LENGTH = 1_000_000

#: What a value the model cannot score does (score, predict): raise, or count as missing.
UNKNOWN_CHOICES = ("error", "missing")


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


def _checked_precision(value: str) -> Precision:
    """``--precision`` resolved (still the name it was given), or a usage error saying what is
    accepted."""
    try:
        return resolve_precision(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


def _check_device(p: Precision) -> None:
    """Refuse, before reading anything, a torch device this machine does not have (the API
    finds out in the first E-step)."""
    if p.engine is Engine.TORCH and p.device is not None and not torch_device_available(p.device):
        raise CLIError(f"--precision {str(p)!r} runs through torch on {p.device!r}, which "
                       f"this machine does not have: run the band on the CPU ('{p.band}@cpu') "
                       f"or on a machine with that device")


def _reports_bad_input(command: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except click.ClickException:
            raise
        except BrokenPipeError:  # the reader left (`| head`): stop quietly, as a pipe's writer
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error
            sys.exit(BROKEN_PIPE_STATUS)
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
    if Path(path).suffix.lower() in (".npy", ".jsonl"):
        rows = read_data(path)
        return column_specs(rows) if _is_pandas_frame(rows) else None
    return column_specs(path)


def _estimator(spec_source: str, data_path: str | None) -> Estimator:
    spec = load_spec(spec_source)
    return estimator_from_spec(spec, None if data_path is None else _columns_of(data_path))


def _max_model_bytes(command: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--max-model-bytes`` option of a command that reads model files."""
    return click.option("--max-model-bytes", type=click.IntRange(min=1), default=MAX_FILE_BYTES,
                        show_default=True, help="Largest model file read (an untrusted file "
                        "is refused above it; raise it for a model this large that you "
                        "wrote).")(command)


def _load_model(path: str, max_bytes: int = MAX_FILE_BYTES) -> Distribution:
    """The model file at ``path``, read with the guards of :func:`mixfold.load`."""
    try:
        doc = read_json_bounded(path, max_bytes, raise_with="--max-model-bytes")
        return model_from_document(doc, str(path))
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
# Writing outputs: checked before any work, written beside the target, renamed when complete


def _check_output(path: str | None, option: str, *inputs: str | None) -> None:
    """Refuse, before any fitting or scoring, an output that is one of the inputs or that
    cannot be written (``-`` is standard output)."""
    if path is not None and path != "-":
        check_destination(path, [p for p in inputs if p is not None and p != "-"], option)


def _inline_or_file(spec: str) -> str | None:
    """The spec's path when SPEC names a file (an input --out must not overwrite)."""
    return spec if os.path.exists(spec) else None


@contextmanager
def _output(path: str | None, mode: str = "w") -> Iterator[Any]:
    """Standard output for ``-``, nothing for None, else a file that replaces ``path`` only
    when the command completes (a failure on a later block leaves the old file)."""
    if path is None:
        yield None
    elif path == "-":
        yield sys.stdout
    else:
        with atomic_output(path, mode) as fh:
            yield fh


def _save_figure(figure: Any, path: str) -> None:
    """Save a matplotlib figure atomically, in the format its suffix names (PNG without one)."""
    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    with _output(path, "wb") as fh:
        figure.savefig(fh, format=fmt)


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
@click.option("--init", "init_path", type=click.Path(dir_okay=False), default=None,
              metavar="MODEL", help="Start from this fitted model file (a warm start) instead "
              "of the seeded initialisation; it must have the spec's structure.")
@click.option("--out", type=click.Path(dir_okay=False, writable=True, allow_dash=True),
              default="model.json", show_default=True,
              help="Where to write the fitted model (JSON); '-' writes it to standard output.")
@click.option("--progress/--no-progress", default=None,
              help="Show a progress bar on stderr (default: when stderr is a terminal).")
@_max_model_bytes
@_reports_bad_input
def fit(data: str, spec: str, backend: str, workers: int | None, precision: Precision,
        max_iter: int, tol: float, seed: int, init_path: str | None, out: str,
        progress: bool | None, max_model_bytes: int) -> None:
    """Fit the model SPEC to DATA by EM and write the fitted model as JSON."""
    _check_output(out, "--out", data, init_path, _inline_or_file(spec))  # before the fit
    _check_device(precision)
    estimator = _estimator(spec, data)
    start = None if init_path is None else _load_model(init_path, max_model_bytes)
    rows = as_fit_input(data, estimator, backend=backend)
    if progress is None:
        progress = sys.stderr.isatty()
    if backend == "mpi":
        progress = progress and _mpi_comm().rank == 0
    with warnings.catch_warnings():
        # the fit's own warnings are in result.warnings: printed once, below, not over the bar
        warnings.simplefilter("ignore", DegenerateFitWarning)
        warnings.simplefilter("ignore", EMDecreaseWarning)
        result = mixfold.fit(rows, estimator, backend=backend, num_workers=workers,
                             precision=precision, max_iter=max_iter, tol=tol, seed=seed,
                             init=start, progress=progress)
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
        with warnings.catch_warnings(record=True) as large:  # one line, not a Python warning
            warnings.simplefilter("always", RuntimeWarning)
            mixfold.save(result.model, out)
        for warning in large:
            click.echo(f"warning: {warning.message}", err=True)
    click.echo(f"{result.stop_reason} after {result.iterations} iterations on {result.n_rows} "
               f"rows ({result.backend}, {result.precision}); model written to "
               f"{'standard output' if to_stdout else out}", err=report)


# ---------------------------------------------------------------------------------------------
# score and sample


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.argument("data", type=click.Path(dir_okay=True))
@click.option("--per-row", type=click.Path(dir_okay=False, writable=True, allow_dash=True),
              default=None, help="Also write every row's log-density, one per line ('-': "
              "standard output).")
@click.option("--unknown", type=click.Choice(UNKNOWN_CHOICES), default="error",
              show_default=True, help="A value the model cannot score (a level never seen at "
              "fit, a NaN where the fit had none): an error, or left out of its row as missing "
              "(records and mixtures of records).")
@_max_model_bytes
@_reports_bad_input
def score(model_path: str, data: str, per_row: str | None, unknown: str,
          max_model_bytes: int) -> None:
    """Log-likelihood of DATA under the fitted MODEL (read block by block)."""
    _check_output(per_row, "--per-row", model_path, data)
    model = _load_model(model_path, max_model_bytes)
    source = read_data(data)
    n, total = 0, 0.0
    to_stdout = per_row == "-"
    with _output(per_row) as sink:
        for block in _blocks(source, model):
            start = n
            try:
                if unknown == "missing":
                    scores = _logsumexp_rows(_lenient_scores(model, block))
                else:
                    scores = model.seq_log_density(model.encoder().encode(block))
            except mixfold.DataError as err:
                row = None if err.row is None else start + err.row
                raise CLIError(str(err.within(row=row))) from None
            n += scores.size
            total += float(scores.sum())
            if sink is not None:
                np.savetxt(sink, scores, fmt="%.17g")
        if n == 0:
            raise CLIError(f"{data!r} has no rows")
    click.echo(f"rows {n}  total log-likelihood {total:.10g}  mean {total / n:.10g}",
               err=to_stdout)  # with the per-row scores on stdout, the summary goes to stderr


def _lenient_scores(model: Distribution, block: Any) -> np.ndarray:
    """log w_k + log p_k(row) of a mixture of records (or log p(row) of a record), shape
    (n_rows, K), each field value the model cannot score left out of its row."""
    if isinstance(model, RecordDistribution):
        return records_log_densities([model], block)
    if isinstance(model, MixtureDistribution) and all(
            isinstance(c, RecordDistribution) for c in model.components):
        with np.errstate(divide="ignore"):
            return np.log(model.weights) + records_log_densities(model.components, block)
    raise CLIError(f"--unknown missing needs a record or a mixture of records, got a "
                   f"{type(model).__name__}")


def _logsumexp_rows(scores: np.ndarray) -> np.ndarray:
    top = scores.max(axis=1)
    return top + np.log(np.exp(scores - top[:, None]).sum(axis=1))


def _predictions(model: Distribution, enc: Any, proba: bool) -> list[Any]:
    """Per row: the most likely component (mixtures) or state path (hidden Markov models), or
    the posteriors with ``proba``; ``enc`` may also be the posteriors themselves."""
    if isinstance(enc, np.ndarray):
        return enc.tolist() if proba else enc.argmax(axis=1).tolist()
    if isinstance(model, MixtureDistribution):
        post = model.seq_posterior(enc)
        return post.tolist() if proba else post.argmax(axis=1).tolist()
    if isinstance(model, HiddenMarkovDistribution):
        ends = np.cumsum(enc.counts())
        per_item = model.seq_posterior(enc) if proba else model.seq_viterbi(enc)
        return [part.tolist() for part in np.split(per_item, ends[:-1])] if len(ends) else []
    raise CLIError(f"predict needs a mixture or a hidden Markov model (latent components or "
                   f"states), got a {type(model).__name__}")


def _write_predictions(sink: Any, values: list[Any], fmt: str, proba: bool, first: bool) -> None:
    key = "proba" if proba else "component"
    if fmt == "jsonl":
        sink.writelines(json.dumps({key: v}) + "\n" for v in values)
        return
    if first and values:
        width = len(values[0]) if proba and not isinstance(values[0][0], list) else 0
        sink.write((",".join(f"p{k}" for k in range(width)) if width else key) + "\n")
    for v in values:
        if isinstance(v, list) and v and isinstance(v[0], list):  # a sequence's items
            v = " ".join(json.dumps(x) for x in v)
        elif isinstance(v, list):
            v = ",".join(repr(float(x)) for x in v) if proba else " ".join(map(str, v))
        sink.write(f"{v}\n")


@main.command()
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.argument("data", type=click.Path(dir_okay=True))
@click.option("--proba", is_flag=True, help="Write the posterior probabilities of the "
              "components (states) instead of the most likely one.")
@click.option("--out", default="-", show_default=True, type=click.Path(dir_okay=False,
              allow_dash=True), help="Where to write, one line per row ('-': standard output).")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default=None,
              help="CSV (a header, then one line per row) or JSON lines (default: jsonl for "
              "an --out ending in .json or .jsonl, else csv).")
@click.option("--unknown", type=click.Choice(UNKNOWN_CHOICES), default="error",
              show_default=True, help="A value the model cannot score: an error, or left out "
              "of its row as missing (mixtures of records).")
@_max_model_bytes
@_reports_bad_input
def predict(model_path: str, data: str, proba: bool, out: str, fmt: str | None,
            unknown: str, max_model_bytes: int) -> None:
    """The most likely component of every row of DATA under the fitted MODEL (a mixture; the
    Viterbi states of each sequence for a hidden Markov model), or ``--proba`` the
    posteriors; DATA is read block by block."""
    _check_output(out, "--out", model_path, data)
    model = _load_model(model_path, max_model_bytes)
    if fmt is None:
        fmt = "jsonl" if Path(out).suffix.lower() in (".json", ".jsonl") else "csv"
    source = read_data(data)
    n = 0
    with _output(out) as sink:
        for block in _blocks(source, model):
            try:
                if unknown == "missing":
                    scores = _lenient_scores(model, block)
                    enc: Any = np.exp(scores - scores.max(axis=1, keepdims=True))
                    enc /= enc.sum(axis=1, keepdims=True)
                else:
                    enc = model.encoder().encode(block)
            except mixfold.DataError as err:
                row = None if err.row is None else n + err.row
                raise CLIError(str(err.within(row=row))) from None
            _write_predictions(sink, _predictions(model, enc, proba), fmt, proba, n == 0)
            n += len(enc)
        if n == 0:
            raise CLIError(f"{data!r} has no rows")


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
@_max_model_bytes
@_reports_bad_input
def sample(model_path: str, count: int, seed: int | None, length: int | None,
           max_model_bytes: int) -> None:
    """Draw rows from the fitted MODEL, one JSON value per line (drawn and printed in blocks
    of 10,000 rows, or of 10,000 items with --length: memory does not grow with -n)."""
    if length is not None and length > MAX_SAMPLE_LENGTH:
        raise CLIError(f"--length {length} is over the limit of {MAX_SAMPLE_LENGTH} items: a "
                       f"sequence is one line, drawn and held whole in memory")
    model = _load_model(model_path, max_model_bytes)
    if length is None:
        sampler = model.sampler(seed)
    else:
        try:
            sampler = model.sampler(seed, sample_length=length)
        except TypeError:
            raise CLIError(f"--length applies to sequence and hidden Markov models, not to a "
                           f"{type(model).__name__}") from None
    block = SAMPLE_BLOCK_ROWS if not length else max(1, SAMPLE_BLOCK_ROWS // length)
    for begin in range(0, count, block):  # printed block by block: bounded memory
        try:
            rows = sampler.sample(min(block, count - begin))
        except ValueError as err:
            if "sample_length" not in str(err):
                raise
            raise CLIError(f"{str(err).split(':')[0]}: pass --length L to draw sequences of L "
                           f"items") from None
        click.echo("\n".join(json.dumps(_jsonable(row)) for row in rows))


# ---------------------------------------------------------------------------------------------
# select: BIC / AIC over a range of K


def _k_range(text: str) -> list[int]:
    """``"1-6"`` or ``"2,4,8"`` as a list of integers >= 1."""
    try:
        if "-" in text:
            low, high = (int(v) for v in text.split("-", 1))
            ks = list(range(low, high + 1))
        else:
            ks = [int(v) for v in text.split(",")]
    except ValueError:
        raise CLIError(f"--k must be a range like 1-6 or a list like 2,4,8, got {text!r}") \
            from None
    if not ks or min(ks) < 1:
        raise CLIError(f"--k must name numbers of components >= 1, got {text!r}")
    return ks


@main.command()
@click.argument("data", type=click.Path(dir_okay=True))
@click.option("--model", "spec", required=True, metavar="SPEC",
              help="A mixture spec (its k is replaced by each value of --k).")
@click.option("--k", "k_text", required=True, help="Numbers of components: 1-6 or 2,4,8.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--n-init", type=click.IntRange(min=1), default=1, show_default=True,
              help="Seeded starts per K (the best is kept).")
@click.option("--max-iter", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True),
              default=None, help="Also draw BIC and AIC against K (needs matplotlib).")
@_reports_bad_input
def select(data: str, spec: str, k_text: str, seed: int, n_init: int, max_iter: int,
           plot_path: str | None) -> None:
    """Fit the mixture SPEC to DATA for each K and print BIC and AIC (lower is better)."""
    _check_output(plot_path, "--plot", data, _inline_or_file(spec))
    node = load_spec(spec)
    if not isinstance(node, dict) or "mixture" not in node:
        raise CLIError("select needs a mixture spec ({\"mixture\": ..., \"k\": ...})")
    columns = _columns_of(data)
    fits = {}
    for k in _k_range(k_text):
        estimator = estimator_from_spec({**node, "k": k}, columns)
        fits[k] = mixfold.fit(as_fit_input(data, estimator), estimator, seed=seed,
                              n_init=n_init, max_iter=max_iter, progress=False)
    best = min(fits, key=lambda k: fits[k].bic)
    click.echo(_table(["k", "mean log-likelihood", "parameters", "BIC", "AIC", ""],
                      [[k, f"{r.final_log_likelihood:.8g}", r.n_parameters, f"{r.bic:.6g}",
                        f"{r.aic:.6g}", "<- lowest BIC" if k == best else ""]
                       for k, r in fits.items()]))
    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        _save_figure(plot_model_selection(fits).figure, plot_path)
        click.echo(f"plot written to {plot_path}")


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
    for name, node in list(columns.items()):
        if isinstance(node, LeftOut):
            click.echo(f"note: {node.message}", err=True)
            del columns[name]
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


def _model_for_plan(model_arg: str, data: str | None,
                    max_model_bytes: int = MAX_FILE_BYTES) -> tuple[Distribution, int | None]:
    """A model to plan for and the data's row count (when DATA says it).

    A fitted model file is used as it is. A spec is sized by DATA when given (its seeded
    starting model on the first block: real vocabularies and dimensions), else by the spec alone
    (categorical levels and vector dimensions must then be written in it).
    """
    path = Path(model_arg)
    if path.suffix.lower() == ".json" and path.is_file():
        try:
            doc = read_json_bounded(path, max_model_bytes, raise_with="--max-model-bytes")
        except ModelFileError as err:
            raise CLIError(str(err)) from None
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
@_max_model_bytes
@_reports_bad_input
def plan(model_arg: str, resources_path: str, data: str | None, rows: int | None,
         target_rel_error: float | None, plot_path: str | None, max_model_bytes: int) -> None:
    """Print the model decomposition and the heterogeneous (rows and precision) plan."""
    _check_output(plot_path, "--plot", resources_path, data, _inline_or_file(model_arg))
    try:
        resources = Resources.from_json(Path(resources_path).read_text())
    except (ValueError, KeyError, TypeError) as err:
        raise CLIError(f"{resources_path!r} is not a resources description: "
                       f"{_one_line(err)}") from None
    model, data_rows = _model_for_plan(model_arg, data, max_model_bytes)
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
        _save_figure(plot_plan_timeline(spans).figure, plot_path)
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
