"""What every refusal of the command line looks like: exit status 1 and one line on stderr."""


def one_error_line(result, *words):
    """Assert that a CliRunner ``result`` failed with one ``mixfold: error:`` line holding
    ``words``."""
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mixfold: error: "), result.stderr
    assert all(w in lines[0] for w in words), lines[0]
