"""One module per CLI command. Each defines `HELP`, `configure(parser)` and `run(args) -> int`."""
