"""Which rows of a data set (default Ops-6K) are structurally > 0.9 similar to a KernelBench problem, and which
use exactly a KernelBench problem's operator set (see cuda_agent/synth/decontaminate.py for both measures).

Run: python bench/synth_decontamination.py [DATA.parquet] --out FILE.json
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

from cuda_agent.synth.decontaminate import StructureIndex, operator_signature
from cuda_agent.tasks import Catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", nargs="?", default=None, help="parquet with ops and code (default: Ops-6K)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--threshold", type=float, default=0.9)
    args = parser.parse_args()
    catalog = Catalog()
    kernelbench = [(t.ref, t.code) for t in catalog.tasks("kernelbench")]
    rows = pq.read_table(Path(args.data) if args.data else catalog.locate("ops6k")).to_pylist()
    index = StructureIndex(kernelbench)
    signatures: dict[frozenset[str], str] = {}
    for ref, code in kernelbench:
        signatures.setdefault(operator_signature(code), ref)
    similar, same = [], []
    for i, row in enumerate(rows):
        nearest = index.nearest(row["code"], at_least=args.threshold)
        if nearest.similarity > args.threshold:
            similar.append(
                {"row": i, "ops": row["ops"], "similarity": round(nearest.similarity, 4), "kernelbench": nearest.ref}
            )
        signature = operator_signature(row["code"])
        if signature in signatures:
            same.append(
                {"row": i, "ops": row["ops"], "kernelbench": signatures[signature], "signature": sorted(signature)}
            )
    report = {
        "rows": len(rows),
        "threshold": args.threshold,
        "above_threshold": len(similar),
        "same_operator_set": len(same),
        "most_matched_kernelbench": Counter(s["kernelbench"] for s in similar).most_common(10),
        "similar": sorted(similar, key=lambda s: -s["similarity"]),
        "same_signature": same,
    }
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    print(
        json.dumps({k: report[k] for k in ("rows", "above_threshold", "same_operator_set", "most_matched_kernelbench")})
    )


if __name__ == "__main__":
    main()
