"""Threat 17: reading or writing files, the environment or the network (static policy)."""

from __future__ import annotations

import pytest

from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    ("headers", "launch"),
    [
        ("#include <cstdio>", 'FILE* f = fopen("/tmp/out", "w");'),
        ("#include <cstdlib>", 'const char* home = getenv("HOME");'),
        ("#include <cstdlib>", 'system("curl example.com");'),
        ("", "int s = socket(2, 1, 0);"),
        ("", 'void* h = dlopen("libc.so.6", 1);'),
    ],
    ids=["fopen", "getenv", "system", "socket", "dlopen"],
)
def test_rejects_file_and_network_access_in_cpp(headers: str, launch: str) -> None:
    assert checks(solution(headers=headers, launch=launch)) == expect({"file_or_network_access"})


def test_rejects_fstream() -> None:
    source = solution(headers="#include <fstream>", launch='std::ifstream in("/etc/passwd");')
    assert checks(source) == expect({"forbidden_library", "file_or_network_access"})


@pytest.mark.parametrize(
    ("prelude", "expected"),
    [
        ("data = open('/tmp/ref.pt', 'rb').read()", {"file_or_network_access"}),
        ("ref = torch.load('/tmp/ref.pt')", {"file_or_network_access"}),
        ("import socket", {"forbidden_import"}),
        ("import os\nos.remove('/tmp/ref.pt')", {"file_or_network_access"}),
        ("import os\nsh = os\nsh.system('id')", {"file_or_network_access"}),
        ("from os import system", {"forbidden_import"}),
        ("import os\nos.environ['OMP_NUM_THREADS'] = '64'", {"global_state_change"}),
        ("import os\nos.environ.update(TORCH_SHOW_CPP_STACKTRACES='1')", {"global_state_change"}),
    ],
    ids=["open", "torch_load", "socket", "os_remove", "os_alias", "from_os", "env_write", "env_update"],
)
def test_rejects_file_and_network_access_in_python(prelude: str, expected: set[str]) -> None:
    assert checks(solution(prelude=prelude)) == expected


def test_rejects_build_directory() -> None:
    flags = 'functions=["relu_forward"], build_directory="/tmp/x",'
    assert checks(solution().replace('functions=["relu_forward"],', flags)) == expect({"file_or_network_access"})


def test_accepts_reading_the_environment() -> None:
    prelude = "import os\nfrom os import getenv\nDEBUG = os.environ.get('RELU_DEBUG', '') == '1' or 'X' in os.environ\nA = getenv('A')"
    assert checks(solution(prelude=prelude)) == set()


@pytest.mark.slow
def test_a_baseline_rewritten_during_the_run_is_not_used(tmp_path) -> None:  # noqa: ANN001
    # A red-team solution (2026-12-05) rewrote the cached baselines 50x slower while it ran, and the baselines
    # stage read them after. With the static policy off (torch.os is refused there) and the candidate as the
    # judge's own user (as root, it would not even see the cache: test_escape.py), the runtime defence alone:
    # the stage uses the copy read before the candidate's code ran.
    from cuda_agent.judge import JudgeConfig, baseline_key
    from cuda_agent.tasks import Catalog
    from tests.judge.threats._hacks import judge_hack, model_new

    honest = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu(x.contiguous())"), time=True)
    assert honest.verdict == "pass" and honest.timings_ms.eager, honest.message
    config = JudgeConfig(device="cpu")
    cached = (
        config.cache_dir / "baselines" / f"{baseline_key(Catalog().resolve('examples/relu').code, 'cpu', config)}.json"
    )
    kept = cached.read_text()
    rewrite = (
        "import json, pathlib\n"
        f"f = pathlib.Path({str(cached)!r})\n"
        "d = json.loads(f.read_text())\n"
        "d['eager']['median_ms'] *= 50\n"
        "f.write_text(json.dumps(d))"
    )
    try:
        verdict = judge_hack(
            tmp_path,
            "examples/relu",
            model_new("return ext.relu(x.contiguous())", init=rewrite),
            time=True,
            static_policy=False,
            verdict_cache=False,  # the candidate must run (an earlier run of this test cached its verdict)
            candidate_user=None,
        )
        assert cached.read_text() != kept  # the candidate did rewrite it
    finally:
        cached.write_text(kept)
    assert verdict.verdict == "pass", verdict.message
    # The cached eager time read before the candidate ran (the verdict's eager is that one, rescaled on the CPU by
    # the machine's drift measured beside the run: near it, never 50 times it).
    assert verdict.env["timing"]["eager"]["median_ms"] == honest.env["timing"]["eager"]["median_ms"]
    assert verdict.timings_ms.eager < 2 * honest.timings_ms.eager
