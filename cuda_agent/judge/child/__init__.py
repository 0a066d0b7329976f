"""The judge's child-process side: what runs in the candidate's process (worker, trial, guards, compare,
inputs, timing) and in the baselines' (baseline), never in the grader's.

Each runs as `python -m cuda_agent.judge.child.worker` or `python -m cuda_agent.judge.child.baseline`,
started by the grader (pipeline.py, standby.py), and talks to it through JSON files (protocol.py).
"""
