"""MISTAKE: equal logits broken the other way: the pair packs the inverted id, so among equal logits the
higher token id sorts first (the reference, like torch's stable sort, takes the lower id)."""

SOLUTION = "day64_topk_topp_sampling"
EDITS = [("return (uint64(descending_key(bits)) << uint64(32)) | uint64(i)",
          "return (uint64(descending_key(bits)) << uint64(32)) | uint64(0x7FFFFFFF - i)"),
         ("    return int32(pair & uint64(0xFFFFFFFF))", "    return int32(0x7FFFFFFF - (pair & uint64(0xFFFFFFFF)))")]
