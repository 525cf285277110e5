"""``python -m mixfold ...`` runs the command line (:mod:`mixfold.cli`)."""

from mixfold.cli import main

main(prog_name="mixfold")
