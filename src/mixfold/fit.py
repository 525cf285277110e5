"""The one EM loop: encode once, seed the start, then fold / reduce / estimate to convergence."""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mixfold.acceleration import ACCELERATIONS, Squarem, squarem_for
from mixfold.backends import EncodedDataHandle
from mixfold.backends.worker_records import WorkerRecord
from mixfold.capabilities import VariationalBound
from mixfold.checkpoint import CheckpointFile, check_checkpoint_path, structure_difference
from mixfold.dispatch import encode_data, open_backend
from mixfold.errors import (
    BandPromotionWarning,
    DataError,
    DegenerateFitWarning,
    EMDecreaseWarning,
    NumericalError,
    ParameterError,
    warn_at_caller,
)
from mixfold.families._frozen import check_frozen, frozen_anywhere, hold_frozen
from mixfold.families._protocol import Distribution, Estimator
from mixfold.io.kinds import kind_of
from mixfold.io.tables import prepared_input
from mixfold.options import (Rule, check_options, flag, integer, none_or, number, one_of,
                             path_like, rule)
from mixfold.parallel.executor import fit_pools
from mixfold.parallel.heterogeneous import HeterogeneousPlan, PlanRequest
from mixfold.parallel.model_parallel import placed_estimator
from mixfold.precision import (BANDS, DOUBLE_DOUBLE, FLOAT64, Precision, check_precision,
                               log_likelihood_resolution, resolve_precision)

__all__ = ["optimize", "fit", "FitResult", "IterationInfo", "encode_data"]

#: A log-likelihood drop smaller than this (relative) is round-off, not a decrease.
DECREASE_TOLERANCE = 1e-9


@dataclass
class IterationInfo:
    """What a callback sees after each EM iteration.

    Attributes
    ----------
    iteration : int
        The iteration just finished, from 0.
    log_likelihood : float
        The mean log-likelihood per row its E-step measured.
    delta : float
        Its change from the previous iteration (inf after the first).
    seconds : float
        The wall time of the iteration.
    model : Distribution
        The model after the iteration's M-step.
    lower_bound : float or None
        A variational fit's evidence lower bound (None for EM).
    """

    iteration: int
    log_likelihood: float
    delta: float
    seconds: float
    model: Distribution
    lower_bound: float | None = None


@dataclass
class FitResult:
    """The history of one fit, as :func:`fit` returns it (and ``model.fit_result``).

    Attributes
    ----------
    model : Distribution
        The model after the last accepted M-step.
    log_likelihood : list of float
        ``log_likelihood[i]`` is the mean log-likelihood per row (weighted by row weights) of
        the model that entered iteration ``i``: the value its E-step computed.
    seconds : list of float
        The wall time of each iteration.
    iterations : int
        Accepted iterations.
    converged : bool
        Whether the relative change fell below ``tol``.
    stop_reason : str
        ``"max_iter"``, ``"converged"``, ``"decrease"``, ``"callback"``, or
        ``"checkpoint_past_max_iter"`` (resumed from a checkpoint that already holds more than
        ``max_iter`` iterations).
    n_rows : int
        Rows fitted.
    init_seconds : float
        The wall time of the initialisation.
    backend : str
        The backend the fit ran on.
    precision : str
        The E-step's band, or the bands of a plan joined by "+".
    warnings : list of str
        Each degenerate state and decrease the fit reported, once per kind.
    plan : HeterogeneousPlan or None
        The :class:`~mixfold.parallel.heterogeneous.HeterogeneousPlan` executed (None: no
        plan).
    seed : int
        The seed of the start this result came from (with ``n_init``: the best start's).
    start_log_likelihoods : list of float
        The final mean log-likelihood of every start, in seed order.
    total_weight : float
        The sum of the row weights (the number of rows when unweighted).
    n_parameters : int or None
        Free parameters of the model, tied ones counted once (None: a family that cannot
        count them).
    folds : int
        The E-steps (folds over the data: on a cluster, round trips) this start ran, its
        initialisation's included. ``iterations`` counts the accepted ones; with
        ``accelerate="squarem"`` the extrapolated points dropped by the safeguard are folds
        too.
    lower_bound : list of float
        A variational fit's evidence lower bound (total, not per row) at each iteration:
        ``lower_bound[i]`` is that of the model that entered iteration ``i`` with the
        responsibilities its E-step computed; what the fit converges on, and never falls
        (empty for EM).
    workers : tuple of WorkerRecord
        One :class:`~mixfold.backends.worker_records.WorkerRecord` per shard of the rows, in row
        order: the executor it lived on (the engine's id) and its host, its planned device, the
        band its last fold ran, its rows, and its fold's mean seconds, measured where it ran
        (over every fold of the fit, all starts included).
    """

    model: Distribution
    log_likelihood: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    iterations: int = 0
    converged: bool = False
    stop_reason: str = "max_iter"
    n_rows: int = 0
    init_seconds: float = 0.0
    backend: str = "local"
    precision: str = "float64"
    warnings: list[str] = field(default_factory=list)
    #: the :class:`~mixfold.parallel.heterogeneous.HeterogeneousPlan` executed (None: no plan)
    plan: Any = None
    #: the seed of the start this result came from (with ``n_init``: the best start's)
    seed: int = 0
    #: the final mean log-likelihood of every start, in seed order (one entry without ``n_init``)
    start_log_likelihoods: list[float] = field(default_factory=list)
    #: the sum of the row weights (the number of rows when unweighted)
    total_weight: float = 0.0
    #: free parameters of the model, tied ones counted once (None: a family that cannot count)
    n_parameters: int | None = None
    #: each band the fit promoted because it drifted ("iteration 3: bfloat16 -> float32")
    promotions: list[str] = field(default_factory=list)
    #: the E-steps (folds over the data) this start ran, its initialisation's included: with
    #: ``accelerate``, also the folds of extrapolated points it dropped
    folds: int = 0
    #: a variational fit's evidence lower bound at each iteration (empty for EM)
    lower_bound: list[float] = field(default_factory=list)
    #: one record per shard: where it ran, in which band, its rows and seconds per fold
    workers: tuple[WorkerRecord, ...] = ()

    @property
    def final_log_likelihood(self) -> float:
        """The last mean log-likelihood per row the fit measured."""
        return self.log_likelihood[-1] if self.log_likelihood else float("nan")

    @property
    def bic(self) -> float:
        """The Bayesian information criterion, scikit-learn's convention (lower is better).

        ``-2 * total log-likelihood + n_parameters * log(total weight)``, from the last
        log-likelihood the fit measured.
        """
        return (-2.0 * self.final_log_likelihood * self.total_weight
                + self._parameters() * math.log(self.total_weight))

    @property
    def aic(self) -> float:
        """The Akaike information criterion, ``-2 * total log-likelihood + 2 * n_parameters``."""
        return -2.0 * self.final_log_likelihood * self.total_weight + 2.0 * self._parameters()

    def _parameters(self) -> int:
        if self.n_parameters is None:
            raise ValueError(f"{type(self.model).__name__} does not count its parameters: no "
                             f"BIC or AIC")
        return self.n_parameters


# option -> what it accepts; checked once, up front
_OPTION_RULES: dict[str, Rule] = {
    "max_iter": integer(0),
    "tol": number(0),
    "seed": integer(0),
    "n_init": integer(1),
    "chunk_rows": none_or(integer(1)),
    "progress": none_or(flag()),
    "target_rel_error": none_or(number(0, above=True)),
    "precision": rule(lambda v: v == "auto" or _is_precision(v),
                      "'auto' or a precision band (optionally '<band>@<device>')"),
    "checkpoint": none_or(path_like()),
    "num_workers": none_or(integer(1)),
    "accelerate": none_or(one_of(*ACCELERATIONS)),
}


def _is_precision(v: Any) -> bool:
    try:
        check_precision(v)
    except ValueError:
        return False
    return True


class _Progress:
    """A tqdm progress bar on stderr (on by default only in a terminal). Its total is the
    iteration where the fit is expected to converge (the relative change shrinking at its
    recent rate down to ``tol``), bounded by ``max_iter``; at the end it is the iterations run."""

    def __init__(self, enabled: bool | None, max_iter: int, tol: float = 0.0):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.max_iter, self.tol = max_iter, tol
        self.bar: Any = None
        self.change: float | None = None
        self.shown = warnings.showwarning
        if self.enabled:  # from the start: warnings of the initialisation go above it too
            from tqdm.auto import tqdm

            self.bar = tqdm(total=max_iter, desc="EM", unit="it", file=sys.stderr,
                            dynamic_ncols=True, leave=True)
            warnings.showwarning = self._show_above_the_bar

    def _expected_total(self, info: IterationInfo) -> int:
        done = info.iteration + 1
        change = abs(info.delta) / max(abs(info.log_likelihood), 1e-300)
        previous, self.change = self.change, change
        if previous is None or not 0 < change < previous < math.inf or change <= self.tol \
                or self.tol <= 0:
            return self.max_iter if change > self.tol else done
        rate = change / previous  # geometric convergence, as EM's is near its optimum
        return min(self.max_iter, done + math.ceil(math.log(self.tol / change) / math.log(rate)))

    def update(self, info: IterationInfo) -> None:
        if self.bar is None:
            return
        total = self._expected_total(info)
        if total != self.bar.total:
            self.bar.total = total
        self.bar.set_postfix_str(f"mean log-lik {info.log_likelihood:.8g}, change "
                                 f"{info.delta:+.2e}", refresh=False)
        self.bar.update(1)

    def _show_above_the_bar(self, message: Any, category: type[Warning], filename: str,
                            lineno: int, file: Any = None, line: str | None = None) -> None:
        self.bar.write(warnings.formatwarning(message, category, filename, lineno, line)
                       .rstrip("\n"), file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            warnings.showwarning = self.shown
            self.bar.total = self.bar.n  # the final line: the iterations the fit ran
            self.bar.refresh()
            self.bar.close()
            self.bar = None


def fit(data: Any, estimator: Estimator, *, max_iter: int = 100, tol: float = 1e-6,
        init: Distribution | Sequence[Distribution] | str | None = None, seed: int = 0,
        n_init: int = 1, weights: Any = None, backend: Any = "local",
        num_workers: int | None = None, precision: str = "float64",
        resources: Any = None, target_rel_error: float | None = None,
        chunk_rows: int | None = None, progress: bool | None = None,
        callbacks: Iterable[Callable[[IterationInfo], Any]] = (),
        checkpoint: str | os.PathLike | None = None, accelerate: str | None = None,
        labels: Any = None) -> FitResult:
    """Fit ``estimator`` to ``data`` by EM and return the history of the fit.

    Takes the same parameters as :func:`optimize`, raises the same errors and warns the same
    warnings.

    Returns
    -------
    result : FitResult
        ``result.model`` is the fitted distribution; the result also holds the per-iteration
        log-likelihood and seconds, the stop reason, BIC and AIC.

    Examples
    --------
    >>> import numpy as np, mixfold
    >>> x = np.random.default_rng(0).normal(size=500) + np.repeat([0, 6], 250)
    >>> result = mixfold.fit(x, mixfold.MixtureEstimator([mixfold.GaussianEstimator()] * 2),
    ...                      progress=False)
    >>> result.stop_reason, result.n_rows, result.n_parameters
    ('converged', 500, 5)
    """
    check_options(None, _OPTION_RULES, dict(
        max_iter=max_iter, tol=tol, seed=seed, n_init=n_init, chunk_rows=chunk_rows,
        progress=progress, precision=precision, target_rel_error=target_rel_error,
        checkpoint=checkpoint, num_workers=num_workers, accelerate=accelerate))
    if checkpoint is not None:
        check_checkpoint_path(checkpoint)
    if checkpoint is not None and accelerate is not None:
        raise ValueError(f"accelerate={accelerate!r} carries its cycle from one iteration to the "
                         f"next, which a checkpoint does not record: pass one or the other")
    planned = resources is not None or precision == "auto"
    if target_rel_error is not None and not planned:
        raise ValueError(f"target_rel_error={target_rel_error!r} is used by the heterogeneous "
                         f"planner: pass precision='auto' and/or resources=")
    if not isinstance(estimator, Estimator):
        raise TypeError(f"estimator must be a mixfold Estimator, got {type(estimator).__name__}")
    starts = _starts(init, n_init, checkpoint)
    start_model = starts[0]  # its encoder fixes the vocabularies
    callbacks = list(callbacks)

    plan = None
    if labels is not None and (isinstance(data, EncodedDataHandle) or precision != "float64"):
        raise ValueError("labels= ride with the rows as they are encoded, and fold in float64: "
                         "pass the rows (not an opened handle) and precision='float64'")
    if isinstance(data, EncodedDataHandle):
        if planned:
            raise ValueError("resources= and precision='auto' plan where the data goes: pass the "
                             "rows, not an opened backend handle")
        handle, owned = data, False
    else:
        # the one look at the input's type; a file path or a table is read into rows
        data, kind = prepared_input(data, kind_of(data), estimator, backend)
        request = PlanRequest(resources, precision, target_rel_error) if planned else None
        handle, estimator, plan = open_backend(backend, data, estimator, init=start_model,
                                               weights=weights, chunk_rows=chunk_rows,
                                               num_workers=num_workers, plan=request,
                                               labels=labels, kind=kind)
        owned = True
    _check_starts(starts, estimator)
    _check_frozen_starts(starts, estimator)
    # what the rows run in, resolved once for every layer below: the plan's band per worker, or
    # one precision
    runs = plan if plan is not None else resolve_precision(precision)
    try:
        with fit_pools():  # the model-parallel threads of this fit stop with it
            result = _best_start(handle, estimator, starts, seed, progress, dict(
                max_iter=max_iter, tol=tol, runs=runs, callbacks=callbacks,
                checkpoint=checkpoint, accelerate=accelerate))
        result.workers = handle.worker_records()
        return result
    finally:
        if owned:
            handle.close()


def _starts(init: Distribution | Sequence[Distribution] | str | None, n_init: int,
            checkpoint: str | os.PathLike | None) -> list[Distribution | None]:
    """The fit's starts: each given distribution, or ``n_init`` seeded ones (``None``)."""
    if isinstance(init, str) and init != "auto":
        raise ValueError(f"init must be None, 'auto' or a Distribution, got {init!r}")
    if isinstance(init, (list, tuple)):  # given starts, one per start
        if not init or not all(isinstance(d, Distribution) for d in init):
            raise TypeError("init as a list must hold one or more Distributions")
        if n_init not in (1, len(init)):
            raise ValueError(f"n_init={n_init} does not match the {len(init)} starts in init")
        starts: list[Distribution | None] = list(init)
    elif init is not None and not isinstance(init, (str, Distribution)):
        raise TypeError(f"init must be None, 'auto' or a Distribution, got {type(init).__name__}")
    elif isinstance(init, Distribution):
        if n_init > 1:
            raise ValueError(f"n_init={n_init} runs several seeded starts: give one "
                             f"starting distribution per start (init=[...]) or none")
        starts = [init]
    else:
        starts = [None] * n_init
    if len(starts) > 1 and checkpoint is not None:
        raise ValueError(f"a checkpoint records one fit: it cannot be combined with "
                         f"{len(starts)} starts")
    return starts


def _best_start(handle: EncodedDataHandle, estimator: Estimator,
                starts: Sequence[Distribution | None], seed: int, progress: bool | None,
                loop: dict[str, Any]) -> FitResult:
    """Every start's EM over the same open handle (start ``i`` seeded ``seed + i``); the fit
    that ends highest (a variational fit's bound, else its log-likelihood), with every start's
    final log-likelihood and the parameter count."""
    best = None
    finals = []
    for i, start_model in enumerate(starts):
        bar = _Progress(progress, loop["max_iter"], loop["tol"])
        try:
            result = _em_loop(handle, estimator, start_model, seed=seed + i, progress=bar,
                              **loop)
        finally:
            bar.close()
        finals.append(result.final_log_likelihood)
        if best is None or _final_objective(result) > _final_objective(best):
            best = result
    best.start_log_likelihoods = finals
    try:
        best.n_parameters = estimator.n_parameters(best.model)
    except NotImplementedError:
        best.n_parameters = None
    return best


def _check_starts(starts: Sequence[Distribution | None], estimator: Estimator) -> None:
    """Refuse a given start whose structure is not the estimator's, naming where they differ."""
    for i, start in enumerate(starts):
        difference = None if start is None else structure_difference(start, estimator)
        if difference:
            which = "init" if len(starts) == 1 else f"init[{i}]"
            raise ValueError(f"{which} does not have the structure of the model being fitted: "
                             f"{difference.replace('the estimator', 'the fitted model')}")


def _check_frozen_starts(starts: Sequence[Distribution | None], estimator: Estimator) -> None:
    """Frozen parameters hold their value in ``init``: every start must be given."""
    if not frozen_anywhere(estimator):
        return
    if any(start is None for start in starts):
        raise ValueError("frozen= parameters are held at their value in init=: pass init (a "
                         "Distribution, or one per start)")
    for start in starts:
        check_frozen(estimator, start)


def _estimate_holding(handle: EncodedDataHandle, estimator: Estimator,
                      start: Distribution | None) -> Callable[..., Any]:
    """``handle.estimate``, its M-step's frozen parameters put back to their values in
    ``start``."""
    if start is None or not frozen_anywhere(estimator):
        return handle.estimate

    def holding(est: Estimator, model: Distribution, precision: Any) -> Any:
        new_model, fold = handle.estimate(est, model, precision)
        return hold_frozen(est, new_model, start), fold

    return holding


def _em_loop(handle: EncodedDataHandle, estimator: Estimator, model: Distribution | None, *,
             max_iter: int, tol: float, seed: int, runs: Precision | HeterogeneousPlan,
             progress: _Progress, callbacks: list[Callable[[IterationInfo], Any]],
             checkpoint: str | os.PathLike | None = None,
             accelerate: str | None = None) -> FitResult:
    if handle.total_weight <= 0:
        raise DataError("the row weights sum to zero: nothing to fit")
    t0 = time.perf_counter()
    plan = runs if isinstance(runs, HeterogeneousPlan) else None
    bands = {a.precision for a in plan.assignments if a.rows > 0} if plan is not None \
        else {runs.band}
    saved = None if checkpoint is None else CheckpointFile(checkpoint, handle, estimator, seed)
    resumed = None if saved is None else saved.resumed
    notes: list[str] = [] if resumed is None else list(resumed.warnings)
    initialised = resumed is None and model is None  # the seeded start folds the rows once
    step = _estimate_holding(handle, estimator, model)
    if resumed is not None:  # the state after the last checkpointed iteration
        model = resumed.model
    elif model is None:  # a dd fit starts from a dd step: its start does not depend on sharding
        start_band = DOUBLE_DOUBLE if bands == {"dd"} else FLOAT64
        model = _checked_m_step("initialisation", notes, handle.initialize, estimator, seed,
                                start_band)
    estimator = placed_estimator(estimator, model)  # a model-parallel cut, planned once
    result = FitResult(model=model, n_rows=handle.n_rows, init_seconds=time.perf_counter() - t0,
                       backend=handle.name, seed=seed, total_weight=handle.total_weight,
                       precision=runs if plan is None else
                       "+".join(b for b in BANDS if b in bands), plan=plan, warnings=notes,
                       folds=int(initialised))
    climb = _Climb(model=model, runs=runs, noise=_decrease_noise(runs),
                   squarem=_accelerator(accelerate, model, notes))
    start = 0 if resumed is None else _resume(result, resumed, climb, max_iter, checkpoint)
    if start is None:  # the checkpoint's fit had ended
        return result
    try:
        for it in range(start, max_iter):
            stop = _iteration(it, handle, estimator, step, climb, result, notes, tol, saved,
                              progress, callbacks)
            if stop:
                return result
        return result
    finally:
        progress.close()


@dataclass
class _Climb:
    """What one EM iteration hands the next: the model it folds, the one before it (a promotion
    goes back to it), the last watched objective, what the rows run in (one precision or a
    plan's bands) and its round-off, SQUAREM's state."""

    model: Distribution
    runs: Precision | HeterogeneousPlan
    noise: float
    squarem: Squarem | None
    previous: float | None = None
    before: Distribution | None = None


def _resume(result: FitResult, resumed: Any, climb: _Climb, max_iter: int,
            checkpoint: str | os.PathLike | None) -> int | None:
    """Put a checkpoint's history into ``result`` and its last objective into ``climb``; the
    iteration to go on from, or ``None`` when the checkpointed fit has nothing left to run."""
    result.init_seconds, result.iterations = resumed.init_seconds, resumed.iterations
    result.log_likelihood, result.seconds = list(resumed.log_likelihood), list(resumed.seconds)
    result.lower_bound = list(resumed.lower_bound)
    if resumed.finished:
        result.stop_reason = resumed.stop_reason
        result.converged = resumed.stop_reason == "converged"
        return None
    if resumed.iterations > max_iter:  # its later iterations cannot be undone: say so
        msg = (f"the checkpoint {str(checkpoint)!r} holds {resumed.iterations} iterations, "
               f"more than max_iter={max_iter}; returning its state")
        warnings.warn(msg, UserWarning, stacklevel=4)
        result.warnings.append(msg)
        result.stop_reason = "checkpoint_past_max_iter"
        return None
    watched = resumed.lower_bound if isinstance(climb.model, VariationalBound) else \
        resumed.log_likelihood  # a variational fit climbs its bound
    climb.previous = watched[-1] if watched else None
    return resumed.iterations


def _iteration(it: int, handle: EncodedDataHandle, estimator: Estimator,
               step: Callable[..., Any], climb: _Climb, result: FitResult, notes: list[str],
               tol: float, saved: CheckpointFile | None, progress: _Progress,
               callbacks: list[Callable[[IterationInfo], Any]]) -> bool:
    """One EM iteration from ``climb``'s model, recorded in ``result``; whether the fit stops."""
    t_it = time.perf_counter()
    squarem, model, previous = climb.squarem, climb.model, climb.previous
    jump = squarem is not None and squarem.extrapolating
    result.folds += 1
    try:
        new_model, fold = _checked_m_step(f"iteration {it}", notes, step, estimator, model,
                                          climb.runs)
    except NumericalError:
        if not jump:
            raise
        new_model, fold = model, None  # an extrapolated point no fold can score
    ll = math.nan if fold is None else fold.mean_log_density
    if jump and not ll >= previous:  # the safeguard: never keep a fall (or a NaN)
        climb.model = squarem.rejected()
        return False
    if not math.isfinite(ll):
        raise NumericalError(f"iteration {it}: mean log-likelihood is {ll}")
    bound = _lower_bound(model, ll, handle.total_weight)
    watched = ll if bound is None else bound  # a variational fit climbs its bound
    delta = math.inf if previous is None else watched - previous
    # a drop within the convergence tolerance is convergence: with pseudo-counts or variance
    # floors EM climbs a regularised objective, whose steps may lower the plain log-likelihood
    # by a hair near the optimum
    if previous is not None and delta < -max(climb.noise * max(abs(previous), 1.0),
                                             tol * abs(previous)):
        if _promoted(it, climb, result, ll):  # a more accurate band repeats the step
            return False
        _stop_on_decrease(it, result, previous, watched, ll, bound, t_it, saved)
        return True
    result.model, result.iterations = new_model, it + 1
    result.log_likelihood.append(ll)
    if bound is not None:
        result.lower_bound.append(bound)
    result.seconds.append(time.perf_counter() - t_it)
    # (an extrapolated point's change is no EM step's: it cannot tell convergence)
    converged = not jump and previous is not None and \
        abs(delta) <= tol * max(abs(previous), 1e-300) and \
        (squarem is None or squarem.settled(tol, abs(delta) / max(abs(previous), 1e-300)))
    if converged:
        result.converged, result.stop_reason = True, "converged"
    if saved is not None:  # before the callbacks: they may stop (or kill) the process
        saved.save(result)
    info = IterationInfo(it, ll, delta, result.seconds[-1], new_model, bound)
    progress.update(info)
    if converged:
        return True
    if any([bool(cb(info)) for cb in callbacks]):
        result.stop_reason = "callback"
        return True
    following = new_model if squarem is None else squarem.after_fold(model, new_model, ll)
    climb.previous, climb.model, climb.before = watched, following, model
    return False


def _promoted(it: int, climb: _Climb, result: FitResult, ll: float) -> bool:
    """After a fall beyond round-off: promote the drifting band and go back to the model before
    the step (``climb`` updated, ``result`` told), if a step was taken and a band is above it."""
    # the least accurate band that runs rows promoted (in a plan: the same rows), or None
    up = None if climb.before is None else climb.runs.promoted()
    if up is None:
        return False
    climb.runs, climb.noise = up, _decrease_noise(up)
    _record_promotion(result, it, climb.previous, ll, up)
    climb.model, climb.before, climb.previous = climb.before, None, None
    result.model = climb.model
    if climb.squarem is not None:
        climb.squarem.restart()
    return True


def _stop_on_decrease(it: int, result: FitResult, previous: float, watched: float, ll: float,
                      bound: float | None, t_it: float, saved: CheckpointFile | None) -> None:
    """A fall EM cannot make: warn, keep the model from before the step, record the stop."""
    what = "mean log-likelihood" if bound is None else "evidence lower bound"
    msg = (f"iteration {it}: the {what} fell from {previous!r} to {watched!r}; "
           f"keeping the model from before that step")
    warn_at_caller(msg, EMDecreaseWarning)
    result.warnings.append(msg)
    result.stop_reason = "decrease"
    result.log_likelihood.append(ll)
    result.seconds.append(time.perf_counter() - t_it)
    if saved is not None:
        saved.save(result)


def _accelerator(accelerate: str | None, model: Distribution,
                 notes: list[str]) -> Squarem | None:
    """The SQUAREM state of a fit with ``accelerate="squarem"``; None for plain EM, said once
    when the model holds a family that does not map its parameters to a flat vector."""
    if accelerate is None:
        return None
    if isinstance(model, VariationalBound):  # its safeguard weighs likelihoods, not a bound
        why = (f"accelerate={accelerate!r} extrapolates EM's steps; a variational fit climbs "
               f"its evidence lower bound instead: it runs without acceleration")
        warn_at_caller(why, UserWarning)
        notes.append(why)
        return None
    squarem, why = squarem_for(model)
    if why is not None:
        warn_at_caller(why, UserWarning)
        notes.append(why)
    return squarem


def _lower_bound(model: Distribution, ll: float, total_weight: float) -> float | None:
    """The evidence lower bound of a variational model whose E-step gave the mean
    log-density ``ll`` (``None`` for a model fitted by plain EM)."""
    if not isinstance(model, VariationalBound):
        return None
    return ll * total_weight - model.kl_to_prior()


def _final_objective(result: FitResult) -> float:
    """What the best of several starts is chosen by: the lower bound, else the likelihood."""
    return result.lower_bound[-1] if result.lower_bound else result.final_log_likelihood


def _decrease_noise(runs: Precision | HeterogeneousPlan) -> float:
    """The relative fall of the log-likelihood that is round-off: what the least accurate band
    that runs rows reports it to (:func:`~mixfold.precision.log_likelihood_resolution`)."""
    names = runs.execution_precisions() if isinstance(runs, HeterogeneousPlan) else [runs]
    return max([DECREASE_TOLERANCE] + [16 * log_likelihood_resolution(p) for p in names])


def _record_promotion(result: FitResult, it: int, previous: float, ll: float,
                      runs: Precision | HeterogeneousPlan) -> None:
    """Say once that a band drifted and what runs now; roll the history back to the model the
    step is repeated from."""
    plan = runs if isinstance(runs, HeterogeneousPlan) else None
    now = "+".join(dict.fromkeys(a.precision for a in plan.assignments if a.rows > 0)) \
        if plan is not None else str(runs)
    was = result.precision if isinstance(result.precision, str) else str(result.precision)
    result.promotions.append(f"iteration {it}: {was} -> {now}")
    msg = (f"iteration {it}: the mean log-likelihood fell from {previous!r} to {ll!r}, beyond "
           f"the resolution of {was}; promoted to {now} and repeated the step")
    warn_at_caller(msg, BandPromotionWarning)
    result.warnings.append(msg)
    result.precision = now if plan is not None else runs
    result.plan = plan if plan is not None else result.plan
    if result.log_likelihood:  # the repeated step records its model's log-likelihood anew
        result.log_likelihood.pop()
        result.seconds.pop()
        result.iterations -= 1


def _checked_m_step(where: str, notes: list[str], step: Callable[..., Any], *args: Any) -> Any:
    """Run an EM step; invalid parameters become a NumericalError, and each distinct degeneracy
    the step reports (a :class:`DegenerateFitWarning`) is recorded in ``notes`` and warned once."""
    with np.errstate(divide="ignore"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DegenerateFitWarning)
        try:
            out = step(*args)
        except ParameterError as err:
            raise NumericalError(f"{where}: the M-step produced invalid parameters: {err}") from err
    seen = {note.split(": ", 1)[-1].split(";")[0] for note in notes}
    for w in caught:
        if not issubclass(w.category, DegenerateFitWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
            continue
        text = str(w.message)
        if text.split(";")[0] not in seen:
            seen.add(text.split(";")[0])
            notes.append(f"{where}: {text}")
            warn_at_caller(f"{where}: {text}", DegenerateFitWarning)
    return out


def optimize(data: Any, estimator: Estimator, *, max_iter: int = 100, tol: float = 1e-6,
             init: Distribution | Sequence[Distribution] | str | None = None, seed: int = 0,
             n_init: int = 1, weights: Any = None, backend: Any = "local",
             num_workers: int | None = None, precision: str = "float64",
             resources: Any = None, target_rel_error: float | None = None,
             chunk_rows: int | None = None, progress: bool | None = None,
             callbacks: Iterable[Callable[[IterationInfo], Any]] = (),
             checkpoint: str | os.PathLike | None = None,
             accelerate: str | None = None, labels: Any = None) -> Distribution:
    """Fit ``estimator`` to ``data`` by EM and return the fitted distribution.

    The one EM loop of mixfold: encode the rows once, seed a start, then fold, reduce and
    re-estimate until the mean log-likelihood per row stops changing. The same call runs on
    every backend and in every precision band.

    Parameters
    ----------
    data : array-like, list of rows, DataFrame, RowBlocks, path or backend handle
        Rows in the format the estimator's encoder reads: an array of shape (n_rows,) for a
        univariate family or (n_rows, n_features) for a vector one, tuples for a Composite,
        dicts or a pandas DataFrame for a Record, lists for a Sequence or hidden Markov model,
        token lists or ``{word: count}`` mappings for LDA. Also an already encoded
        ``Encoded``, a backend handle, a :class:`~mixfold.RowBlocks` source (Parquet row
        groups, CSV chunks, a block factory) for data larger than memory -- fitted out of
        core on the local backend, one pass per iteration with one block in memory at a
        time -- a path to a Parquet or CSV file or folder (read as such a source; into memory
        on the other backends; under MPI each rank reads its share), a ``.npy`` path, or an
        Arrow table (:mod:`mixfold.io.tables`).
    estimator : Estimator
        The model's structure, e.g. ``MixtureEstimator([GaussianEstimator()] * 3)``.
    max_iter : int, default=100
        The most EM iterations to run.
    tol : float, default=1e-6
        Convergence threshold on the relative change of the mean log-likelihood per row.
    init : None, "auto", Distribution or list of Distribution, default=None
        None or "auto": the seeded initialisation. A distribution: start from it. A list:
        one start from each, the best kept as with ``n_init``. Parameters an estimator
        holds (``frozen=``, :mod:`mixfold.families._frozen`) keep their value here.
    seed : int, default=0
        The seed of the start; the starting model depends only on it and the data.
    n_init : int, default=1
        The number of seeded starts (seeds ``seed``, ``seed + 1``, ...). Each runs EM to the
        end over the same encoded, resident data; the start with the highest final
        log-likelihood is returned, all starts' values in
        ``FitResult.start_log_likelihoods``.
    weights : array-like of shape (n_rows,), default=None
        Per-row weights, >= 0.
    backend : str or engine object, default="local"
        One of ``"local"``, ``"mp"``, ``"spark"``, ``"dask"``, ``"ray"``, ``"mpi"``,
        ``"model_parallel"``, or an engine you hold (a SparkSession or SparkContext, a Dask
        Client, an MPI communicator).
    num_workers : int, default=None
        Workers (processes, partitions, tasks) of the backend; None: its default.
    precision : str, default="float64"
        The E-step's band (:mod:`mixfold.precision`): ``"fp8"``, ``"bfloat16"``,
        ``"float16"``, ``"float32"``, ``"float64"`` or ``"dd"``, optionally
        ``"<band>@<device>"`` (``"bfloat16@cuda"``); or ``"auto"`` to let the heterogeneous
        planner choose per worker.
    resources : Resources or list of Worker, default=None
        A :class:`~mixfold.parallel.resources.Resources` or a list of
        :class:`~mixfold.parallel.heterogeneous.Worker`: plan rows and bands over these
        workers and execute the plan, recorded as ``FitResult.plan``.
    target_rel_error : float, default=None
        The heterogeneous planner's accuracy budget (with ``precision="auto"`` or
        ``resources``).
    chunk_rows : int, default=None
        Rows per E-step chunk; None: the fold's default.
    progress : bool, default=None
        Show a progress bar on stderr; None: only when stderr is a terminal.
    callbacks : iterable of callable, default=()
        Each is called with an :class:`IterationInfo` after every iteration; a truthy
        return stops the fit (``stop_reason="callback"``).
    checkpoint : str or path, default=None
        A file the fit's state is written to, atomically, after every iteration. A fit
        started with an existing checkpoint resumes from it, bit-identical to an
        uninterrupted fit (:mod:`mixfold.checkpoint`).
    accelerate : {None, "squarem"}, default=None
        None: plain EM. ``"squarem"``: SQUAREM (:mod:`mixfold.acceleration`), the same fixed
        point in fewer folds over the data (each a round trip on a cluster), on every backend;
        an extrapolated point that scores lower is dropped, so the log-likelihood never falls.
        A model holding a family that does not declare ``parameter_coordinates`` runs plain EM
        (a ``UserWarning`` says so). ``FitResult.folds`` counts the folds.
    labels : array-like or list of array-like, default=None
        What is known of the top node's latent label (:mod:`mixfold.families._labels`): for a
        mixture, per row a component index, ``-1`` for unknown, or a row of K prior
        probabilities (array of shape (n_rows,) or (n_rows, K)); for a hidden Markov model,
        per sequence the state of each item (``-1``: unknown) or its (n_items, S)
        probabilities. Known labels hold through EM; with every row labelled the fit is the
        supervised maximum-likelihood estimate. The labels ride with the encoded rows, so
        every backend that takes rows encoded in the driver folds them (float64 only).

    Returns
    -------
    model : Distribution
        The fitted distribution; its :class:`FitResult` is ``model.fit_result``.

    Raises
    ------
    DataError
        Bad input (a value a family cannot take, a ragged row, negative weights), naming the
        row and the field, before anything is fitted. :class:`~mixfold.DataTypeError` (also a
        ``TypeError``) for a value of the wrong type.
    NumericalError
        A non-finite log-likelihood, or an M-step that produced invalid parameters.
    CheckpointError
        ``checkpoint`` was written by a fit of other data, another estimator or seed.
    ValueError
        An option outside its allowed values (the message says what was expected).

    Warns
    -----
    DegenerateFitWarning
        A degenerate state a floor resolved (a mixture component that lost its rows, a
        collapsed variance); also recorded in ``FitResult.warnings``.
    EMDecreaseWarning
        A step lowered the log-likelihood by more than ``tol``; the model before it is kept.

    See Also
    --------
    fit : the same, returning the :class:`FitResult`.
    OnlineEM : stepwise EM over blocks as they arrive.

    Examples
    --------
    >>> import numpy as np, mixfold
    >>> x = np.random.default_rng(0).poisson(3.0, size=1000)
    >>> model = mixfold.optimize(x, mixfold.PoissonEstimator(), progress=False)
    >>> round(model.lam, 2), model.fit_result.converged
    (3.02, True)
    """
    result = fit(data, estimator, max_iter=max_iter, tol=tol, init=init, seed=seed,
                 n_init=n_init, weights=weights, backend=backend, num_workers=num_workers,
                 precision=precision, resources=resources, target_rel_error=target_rel_error,
                 chunk_rows=chunk_rows, progress=progress, callbacks=callbacks,
                 checkpoint=checkpoint, accelerate=accelerate, labels=labels)
    result.model.fit_result = result
    return result.model
