"""Synth's filter workers take their GPU turns through the shared lock (`cuda_agent.gpu_turns`).

Filter workers share one GPU with each other and with judgements: their eager runs overlap each
other in shared turns, and a timing takes an exclusive turn, as does every judgement.
"""

from cuda_agent.gpu_turns import GpuTurns, NoTurns, turns_for

__all__ = ["GpuTurns", "NoTurns", "turns_for"]
