"""The `cbledger` command: thin typer wrappers that parse, call the library and print."""
