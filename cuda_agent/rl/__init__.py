"""Training on verl: the `cuda_agent` agent-loop adapter, rollouts, RFT data and advantage inputs.

`import cuda_agent.rl` never imports verl: only `cuda_agent.rl.agent_loop` does, and verl imports
that module itself through its agent-loop registry (install with `pip install -e '.[rl]'`).
"""

STAGES = ("single-turn", "collect", "rft", "critic-warmup", "agentic-ppo")
"""The paper's training stages, in order. Here, not in recipes.py, so that building the CLI's parser imports
nothing heavy (recipes.py and its config models cost 0.7 s of every `cuda-agent` command)."""
