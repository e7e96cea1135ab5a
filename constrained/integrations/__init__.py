"""Serving-engine integrations: the engine-agnostic request spec (`spec`), the
compiled-grammar cache shared across requests (`grammar_cache`), the budget guard that
makes outputs finish inside ``max_tokens`` (`budget`), and the adapters (`vllm`)."""
