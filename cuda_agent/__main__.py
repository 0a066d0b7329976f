"""`python -m cuda_agent` runs the CLI."""

from cuda_agent.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
