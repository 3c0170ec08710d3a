"""`python -m app.cli`: the `cxr` command, as `torchrun -m app.cli train` starts it."""

from app.cli import run

if __name__ == "__main__":  # pragma: no cover
    run()
