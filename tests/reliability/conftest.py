# scripts the tests run as separate processes (and kill), not test modules
collect_ignore = ["checkpoint_child.py", "listen_child.py"]
