"""Planning and running a fit across devices: :mod:`~mixfold.parallel.resources` describes the
devices, :mod:`~mixfold.parallel.model_decomposition` decides how a model is split over them,
:mod:`~mixfold.parallel.heterogeneous` plans (and runs) rows and a precision band per worker.

Nothing here is imported by ``import mixfold``; engines are imported only by the functions that
read them (``Resources.from_spark``, ``from_dask``, ``from_ray``, ``from_mpi``).
"""
