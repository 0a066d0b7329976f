"""`python -m utils.verification`: every rule and correctness check of the judge (read-only file)."""

import sys

from cuda_agent.sandbox.workspace_commands import verification_command

if __name__ == "__main__":
    sys.exit(verification_command(sys.argv[1:]))
