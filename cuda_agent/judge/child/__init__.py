"""The judge's child processes: the run stage's grader (grader.py, with trial, compare, inputs, timing, timed_calls)
and the candidate's process it starts (shim.py, with guards), and the baselines' (baseline.py).

Each runs as `python -m cuda_agent.judge.child.MODULE`, started by the pipeline (pipeline.py, standby.py) or, for the
candidate's process, by the grader; the pipeline and the grader read JSON files of each other's (protocol.py), and
the grader and the candidate's process speak over a socket and shared buffers (exchange.py).
"""
