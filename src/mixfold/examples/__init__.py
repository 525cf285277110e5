"""Runnable examples on data bundled with mixfold (``python -m mixfold.examples.customers``)."""
