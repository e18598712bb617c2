"""`python -m envforge ...`: the command line, as the `envforge` script runs it."""
from envforge.pipeline.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
