"""The compiled bit setter equals packing a boolean array (`constrained.masks`)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from constrained.masks import or_token_bits, pack_mask, pack_token_ids


@settings(max_examples=100, deadline=None)
@given(size=st.integers(1, 300), data=st.data(), dtype=st.sampled_from([np.int32, np.int64]),
       readonly=st.booleans())
def test_or_token_bits_equals_packing_a_bool_array(size, data, dtype, readonly) -> None:
    ids = np.array(data.draw(st.lists(st.integers(0, size - 1), max_size=80)), dtype=dtype)   # repeats allowed
    ids.setflags(write=not readonly)
    start = np.array(data.draw(st.lists(st.booleans(), min_size=size, max_size=size)))
    packed = pack_mask(start).view(np.uint8).copy()
    or_token_bits(packed, ids)
    expected = start.copy()
    expected[ids] = True
    assert packed.tobytes() == pack_mask(expected).view(np.uint8).tobytes()
    assert pack_token_ids(ids, size).tobytes() == pack_mask(np.isin(np.arange(size), ids)).tobytes()
