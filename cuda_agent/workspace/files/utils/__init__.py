"""Protected tools of a cuda-agent workspace (read-only; see SKILL.md)."""
