"""cuda-agent: an open reproduction of CUDA Agent (agentic RL for fast, correct CUDA kernels)."""

__version__ = "0.1.0"
