// What identifies a model between nodes: its content hash, its metadata without the bulky tokenizer
// arrays, and its tensor shapes.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "base/system.h"  // default_cache_dir
#include "gguf/gguf.h"
#include "strata.pb.h"

namespace strata::net {

// sha256 of a file's bytes, hex. Cached in `cache_dir` keyed by (path, size, mtime), so a large model
// is hashed once, not at every start. Empty cache_dir: no caching.
Result<std::string> file_sha256(const std::string& path, const std::string& cache_dir);

// A GGUF image holding `file`'s metadata except tokenizer arrays, and no tensors.
Result<std::vector<uint8_t>> metadata_image(const gguf::File& file);

void to_proto(const gguf::TensorInfo& info, v1::TensorSpec* spec);
// Validates a received shape: known type, 1-4 dims, sizes consistent with nbytes.
Result<gguf::TensorInfo> from_proto(const v1::TensorSpec& spec);


}  // namespace strata::net
