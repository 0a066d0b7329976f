"""Machine facts (cuda_agent/machine.py): asked of nvidia-smi or read from files, never of torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE_SMI = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls"
case "$*" in
  "--query-gpu=index,name,uuid,driver_version,compute_cap --format=csv,noheader")
    echo "0, NVIDIA H200, GPU-1a2b-3c4d, 580.95.05, 9.0"; echo "1, NVIDIA H200, GPU-5e6f-7a8b, 580.95.05, 9.0";;
  *) exit 9;;
esac
"""


def _facts_in_a_fresh_process(env: dict[str, str]) -> dict:
    code = (
        "import json, sys; from cuda_agent import machine\n"
        "facts = {'uuids': machine.gpu_uuids(), 'driver': machine.driver_version(), 'arch': machine.cuda_arch_list(),\n"
        "         'gpus': machine.detect_gpus(), 'name': machine.gpu_name(), 'versions': machine.torch_versions()}\n"
        "print(json.dumps(facts | {'torch_imported': 'torch' in sys.modules}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(done.stdout)


def test_gpu_facts_are_nvidia_smis_and_cost_no_torch_import(tmp_path: Path) -> None:
    (tmp_path / "nvidia-smi").write_text(FAKE_SMI)
    (tmp_path / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    env["CUDA_AGENT_CACHE"] = str(tmp_path / "cache")
    facts = _facts_in_a_fresh_process(env | {"PATH": f"{tmp_path}:{env['PATH']}"})
    assert facts["uuids"] == ["GPU-1a2b-3c4d", "GPU-5e6f-7a8b"] and facts["gpus"] == [0, 1]
    assert (facts["driver"], facts["arch"], facts["name"]) == ("580.95.05", "9.0", "NVIDIA H200")
    assert facts["torch_imported"] is False
    listed = _facts_in_a_fresh_process(env | {"PATH": f"{tmp_path}:{env['PATH']}", "TORCH_CUDA_ARCH_LIST": "8.0;9.0"})
    assert listed["arch"] == "8.0;9.0"  # what the user set stands
    # One call for all of it, and for every later process of this boot: the table is kept in the cache.
    assert (tmp_path / "calls").read_text().count("\n") == 1


def test_the_gpu_table_is_asked_again_for_another_nvidia_smi_and_when_none_was_seen(tmp_path: Path) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text('#!/bin/sh\necho "$*" >> ' + str(tmp_path / "calls") + "\nexit 9\n")
    smi.chmod(0o755)
    env = dict(os.environ, CUDA_AGENT_CACHE=str(tmp_path / "cache"), PATH=f"{smi.parent}:{os.environ['PATH']}")
    assert _facts_in_a_fresh_process(env)["gpus"] == []
    assert _facts_in_a_fresh_process(env)["gpus"] == []  # no GPUs is not kept: a loading driver is asked again
    assert (tmp_path / "calls").read_text().count("\n") == 2
    smi.write_text(FAKE_SMI)  # a driver upgraded in place: its nvidia-smi is another file
    assert _facts_in_a_fresh_process(env)["name"] == "NVIDIA H200"
    assert _facts_in_a_fresh_process(env)["gpus"] == [0, 1]
    assert (smi.parent / "calls").read_text().count("\n") == 1


def test_without_nvidia_smi_there_are_no_gpus_and_builds_target_hopper(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_CUDA_ARCH_LIST"}
    facts = _facts_in_a_fresh_process(env | {"PATH": str(Path(sys.executable).parent)})  # no nvidia-smi on it
    assert (facts["uuids"], facts["gpus"], facts["driver"], facts["arch"]) == ([], [], None, "9.0")


def test_torch_versions_are_torchs_own_and_read_without_importing_it() -> None:
    # The grader keys its caches by them before any judgement; importing torch there would cost seconds each time.
    code = (
        "import json, sys; from cuda_agent.machine import torch_versions\n"
        "read, imported = torch_versions(), 'torch' in sys.modules\n"
        "import torch\n"
        "print(json.dumps([read, imported, {'torch': torch.__version__, 'cuda': torch.version.cuda}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    read, imported, actual = json.loads(done.stdout)
    assert (read, imported) == (actual, False)
