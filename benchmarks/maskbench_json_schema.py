"""MaskBench for JSON Schemas: `constrained.bench.maskbench` (the same as
``constrained bench maskbench``) with this checkout's defaults (data under
``../shared``, results in ``benchmarks/results``).

    python benchmarks/maskbench_json_schema.py --every 50 --workers 2
"""

import _common  # noqa: F401  (first: pins numeric libraries to one thread)

from constrained.bench.maskbench import main  # noqa: E402

if __name__ == "__main__":
    main()
