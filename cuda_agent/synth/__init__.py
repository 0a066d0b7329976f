"""Ops-6K-style task synthesis: compose 1-5 torch operators, filter, decontaminate, write a parquet.

| module | holds |
|---|---|
| `catalog` | `crawl_catalog(cache_dir) -> OpCatalog`: operators of the installed torch, learnt by probing |
| `overrides` | the small hand-curated table probing cannot decide (argument values, names never called) |
| `compose` | `compose(ops, seed, index, ComposeConfig) -> Candidate`: the seeded rule-based composer |
| `model_compose` | `model_composer(model, ...)`: the same, with an LLM writing the file |
| `filters` | `run_filters(...) -> FilterResult`: the paper's four filters (runs in a worker) |
| `worker`, `pool` | long-lived filter worker processes and the `FilterPool` that feeds and replaces them |
| `decontaminate` | AST structural similarity to KernelBench, operator signatures, duplicate keys |
| `pipeline` | `Synthesizer` + `run_synthesis`: the resumable run, parquet + sidecar |
| `audit` | the four filters over an existing data set (Ops-6K) |
| `report` | `cuda-agent synth report`: a data set next to Ops-6K |

Problems reach the rest of the system only as files (the parquet), read by `cuda_agent.tasks`.
"""
