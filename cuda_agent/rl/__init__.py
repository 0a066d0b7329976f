"""Training on verl: the `cuda_agent` agent-loop adapter, rollouts, RFT data and advantage inputs.

`import cuda_agent.rl` never imports verl: only `cuda_agent.rl.agent_loop` does, and verl imports
that module itself through its agent-loop registry (install with `pip install -e '.[rl]'`).
"""
