"""Where a model benchmark ran (recorded with its results): shared by
`speculative_speed.py` and `decoding_speed.py`.  Unlike `_common`, it pins no thread
counts: the model benchmarks keep torch's own."""

from __future__ import annotations


def environment(lm) -> dict:
    """Where the model ran: device (and its name), dtype, torch / transformers versions."""
    import platform

    import torch
    import transformers

    device = lm.device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    return {"device": str(device), "device_name": name, "dtype": str(next(lm.model.parameters()).dtype),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "cpu_threads": torch.get_num_threads()}
