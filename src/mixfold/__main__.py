"""``python -m mixfold ...`` runs the command line (:mod:`mixfold.cli`)."""

from mixfold.cli import main

if __name__ == "__main__":
    main(prog_name="mixfold")
