"""A child for tests of standby.py: after its request it ticks N times, T seconds apart, then reports.

`python -m tests.judge.standby_child [--standby] [--candidate] [--run PROGRAM] TICKS EVERY_S OUT [LIST_DIR |
--leave-a-child]` writes JSON to OUT: its working folder, its user id, and the names in LIST_DIR (to see a bind
mount). With --candidate it first says that the candidate's code runs (standby.CANDIDATE); with --run it then runs
PROGRAM, ticks once it started, and waits for its end without another tick (as torch's loader runs ninja). As a
standby it takes a shared GPU turn for its set-up where CUDA_AGENT_GPU_TURNS names a lock folder, and keeps it.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from cuda_agent.judge.standby import mark_candidate, progress, serve_once, set_up_turn


def main(argv: list[str]) -> None:
    if argv[:1] == ["--standby"]:
        argv = serve_once(lambda: set_up_turn().__enter__())  # a shared GPU turn where TURNS_ENV names one
    if argv[:1] == ["--candidate"]:
        mark_candidate()
        argv = argv[1:]
    tick = progress()
    if argv[:1] == ["--run"]:
        program = subprocess.Popen([argv[1]])
        tick()  # the step from here: the program runs (a loaded machine may take a while to start it)
        program.wait()
        argv = argv[2:]
    ticks, every, out = int(argv[0]), float(argv[1]), Path(argv[2])
    for _ in range(ticks):
        time.sleep(every)
        tick()
    if len(argv) > 3 and argv[3] == "--leave-a-child":  # a process that outlives us, holding the progress pipe
        os.spawnv(os.P_NOWAIT, "/bin/sleep", ["sleep", "30"])
        argv = argv[:3]
    listing = sorted(os.listdir(argv[3])) if len(argv) > 3 else []
    out.write_text(json.dumps({"cwd": os.getcwd(), "uid": os.getuid(), "listing": listing}))


if __name__ == "__main__":
    main(sys.argv[1:])
