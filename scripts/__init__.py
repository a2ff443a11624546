"""Developer entry points behind the README's two commands (`make run`, `make test`)."""
