// A worker's weight sources: model files it holds (found by content hash in --model-dir) and the cache
// of tensors received from coordinators (--cache-dir/<model sha256>/<tensor>), so the next start
// sends nothing.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "gguf/gguf.h"
#include "model/shard.h"

namespace strata::net {

// A read-only file mapping.
class MappedFile {
 public:
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class TensorStore {
 public:
  TensorStore(std::string cache_dir, std::string model_dir);

  // Hashes the GGUF files in the model dir (memoized by path, size and mtime). Returns how many.
  size_t scan_model_dir();
  std::vector<std::string> model_hashes() const;
  // A local model file with this content hash, or "" if none.
  std::string model_path(const std::string& sha256) const;

  // A tensor is cached whole, or as a slice: a sparse file of the tensor's size that holds only the
  // slice's bytes (a tensor-split member's), kept under a name of its own per slice. A whole copy
  // serves every slice.
  bool has_cached(const std::string& sha256, const gguf::TensorInfo& t, const model::SliceBytes& slice = {}) const;
  Result<std::shared_ptr<const MappedFile>> map_cached(const std::string& sha256, const gguf::TensorInfo& t,
                                                       const model::SliceBytes& slice = {}) const;

  // The tensors one PushTensors stream is receiving. Each is written sequentially (its bytes, or its
  // slice's runs back to back) to a temporary file of the upload's own and renamed into the cache
  // when complete; whatever is incomplete when the upload ends (the stream broke) is deleted, so a
  // retry starts afresh. A slice that reads nothing is complete with one empty chunk at offset 0.
  class Upload {
   public:
    explicit Upload(TensorStore& store);
    ~Upload();
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;
    // A chunk at offset 0 (re)starts the tensor; any other offset must continue where it stopped.
    // `slice` must have passed model::check_slice_bytes against t.nbytes.
    Status write_chunk(const std::string& sha256, const gguf::TensorInfo& t, const model::SliceBytes& slice,
                       uint64_t offset, const std::string& bytes);
    Status write_chunk(const std::string& sha256, const gguf::TensorInfo& t, uint64_t offset, const std::string& bytes) {
      return write_chunk(sha256, t, {}, offset, bytes);
    }

   private:
    TensorStore& store_;
    uint64_t id_;
    std::map<std::string, uint64_t> partial_;  // temporary path -> bytes written
  };

 private:
  std::string cached_path(const std::string& sha256, const std::string& name, const model::SliceBytes& slice) const;
  // The complete cache file that serves this slice (the whole tensor first), or "".
  std::string serving_path(const std::string& sha256, const gguf::TensorInfo& t, const model::SliceBytes& slice) const;

  std::string cache_dir_, model_dir_;
  mutable std::mutex mu_;
  std::map<std::string, std::string> models_;  // sha256 -> path
  uint64_t next_upload_ = 0;
};

}  // namespace strata::net
