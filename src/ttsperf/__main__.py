"""`python -m ttsperf ...` is the `ttsperf` command."""

from ttsperf.cli.main import app

app(prog_name="ttsperf")
