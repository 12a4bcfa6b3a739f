"""``python -m loadgen.mock``: the mock server, as ``loadgen mock-server``."""

from loadgen.mock.command import mock_server_command

mock_server_command()
