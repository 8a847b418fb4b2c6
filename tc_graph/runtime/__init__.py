"""Native runtime: compiling generated C with the system compiler, caching and loading it."""
