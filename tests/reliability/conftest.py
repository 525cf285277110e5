collect_ignore = ["checkpoint_child.py"]  # a script the checkpoint tests run (and kill)
