"""What bench/chain_gpu.sh's carried state leaves out: everything no stage still to run reads.

A device call carries 64 MiB with the tree (~18 MB) and the wheels (~37 MiB), so the state of a chain cut by one
call must stay near 10 MB to travel to the next. Kept: what a stage not yet done reads (the tiny models, earlier
stages' artifacts), a started stage's checkpoints (it resumes from them), and what the final check reads (the RFT
actor and the critic warm-up's actor copy). Left out: finished stages' checkpoints (done stages never run again),
of the critic warm-up's all but its actor's Hugging Face copy and verl's tracker, and every artifact whose readers
are all done.

    python3 bench/chain_state.py WORK    # one tar --exclude=... per line, for `cd WORK && tar -cf ... ./run ...`
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# Stage -> what it reads: stages' artifacts (the manifest's paths) and the tiny models (paths under WORK).
READS = {
    "single-turn": ["tiny/actor", "tiny/critic"],
    "collect": ["single-turn"],
    "rft-data": ["collect"],
    "rft": ["single-turn", "rft-data"],
    "critic-data": ["collect"],
    "critic-warmup": ["rft", "critic-data", "tiny/critic"],
    "agentic-ppo": ["rft", "critic-warmup"],
}
CHECKED = {"rft"}  # the frozen-actor check after the chain compares the critic warm-up's actor with this one


def excludes(work: Path) -> list[str]:
    """tar --exclude arguments (paths relative to `work`, as ./...) for the state of the chain in `work`."""
    manifest = work / "run" / "manifest.json"
    stages = json.loads(manifest.read_text())["stages"] if manifest.exists() else {}
    done = {name for name, record in stages.items() if record.get("status") == "done"}
    out = []
    for name in sorted(done):
        checkpoints = f"./run/{name.replace('-', '_')}/checkpoints"
        if name == "critic-warmup":  # the check reads its actor's HF copy: verl's tracker and that are kept
            # (tar's * also matches "/": actor/*.pt is the sharded model, optimizer and extra state, not huggingface/)
            out += [
                f"--exclude={checkpoints}/global_step_*/critic",
                f"--exclude={checkpoints}/global_step_*/actor/*.pt",
            ]
        else:
            out.append(f"--exclude={checkpoints}")
    for name in [*READS, "tiny/actor", "tiny/critic"]:
        readers = [stage for stage, reads in READS.items() if name in reads]
        if name in CHECKED or not readers or not all(stage in done for stage in readers):
            continue
        if name.startswith("tiny/"):
            out.append(f"--exclude=./{name}")
        elif name in done and (artifact := stages[name].get("artifact")):
            try:
                out.append(f"--exclude=./{Path(artifact).relative_to(work)}")
            except ValueError:  # outside WORK: not in the state anyway
                pass
    return out


if __name__ == "__main__":
    print("\n".join(excludes(Path(sys.argv[1]).resolve())))
