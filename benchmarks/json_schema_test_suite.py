"""JSON Schema Test Suite compliance per keyword: `constrained.bench.test_suite` (the
same as ``constrained bench test-suite``) with this checkout's defaults.

    python benchmarks/json_schema_test_suite.py [--suite DIR] [--out benchmarks/results]
"""

import sys

from constrained.bench.test_suite import main

if __name__ == "__main__":
    sys.exit(main())
