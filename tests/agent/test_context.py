"""Context budget: tokenizer counts where there is one, server usage plus an estimate otherwise, head+tail cuts."""

from __future__ import annotations

from cuda_agent.agent.context import PAPER_CONTEXT_TOKENS, ContextBudget, estimate_tokens, truncate_middle


def test_truncate_middle_keeps_head_and_tail_and_says_how_much() -> None:
    text = "HEAD" + "x" * 10_000 + "TAIL"
    cut, truncated = truncate_middle(text, 1000)
    assert truncated and cut.startswith("HEAD") and cut.endswith("TAIL")
    assert f"[... {len(text) - 1000} characters cut here to fit the context ...]" in cut
    assert truncate_middle("short", 1000) == ("short", False)


def test_estimate_is_chars_over_four_plus_message_overhead() -> None:
    messages = [{"role": "user", "content": "a" * 400}, {"role": "assistant", "content": None}]
    assert estimate_tokens(messages) == 100 + 4 + 0 + 4


def test_budget_prefers_the_tokenizer_then_reported_usage() -> None:
    messages = [{"role": "user", "content": "a" * 40}]
    assert ContextBudget(counter=lambda m: 7 * len(m)).count(messages) == 7
    budget = ContextBudget(max_tokens=1000)
    assert budget.max_tokens == 1000 and ContextBudget().max_tokens == PAPER_CONTEXT_TOKENS == 131_072
    assert budget.count(messages) == 14
    budget.observe(messages, prompt_tokens=500, completion_tokens=100)
    longer = [*messages, {"role": "tool", "content": "b" * 400}]
    assert budget.count(longer) == 600 + 104
    assert budget.remaining(longer) == 296
    assert not budget.exhausted(longer, reserve=296) and budget.exhausted(longer, reserve=297)
    assert budget.exhausted([*longer, {"role": "tool", "content": "c" * 4000}])
