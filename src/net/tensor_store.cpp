#include "net/tensor_store.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "net/model_identity.h"

namespace strata::net {
namespace fs = std::filesystem;

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("{}: cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return make_error("{}: cannot stat", path);
  }
  auto m = std::shared_ptr<MappedFile>(new MappedFile());
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ > 0) {
    void* p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return make_error("{}: cannot map {} bytes", path, m->size_);
    }
    m->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(m));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

TensorStore::TensorStore(std::string cache_dir, std::string model_dir)
    : cache_dir_(std::move(cache_dir)), model_dir_(std::move(model_dir)) {}

size_t TensorStore::scan_model_dir() {
  if (model_dir_.empty()) return 0;
  std::error_code ec;
  std::map<std::string, std::string> found;
  for (auto it = fs::recursive_directory_iterator(model_dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file() || it->path().extension() != ".gguf") continue;
    spdlog::info("worker: hashing {}", it->path().string());
    auto sha = file_sha256(it->path().string(), cache_dir_);
    if (sha.ok()) found[*sha] = it->path().string();
  }
  std::lock_guard lock(mu_);
  models_ = std::move(found);
  return models_.size();
}

std::vector<std::string> TensorStore::model_hashes() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [sha, path] : models_) out.push_back(sha);
  return out;
}

std::string TensorStore::model_path(const std::string& sha256) const {
  std::lock_guard lock(mu_);
  auto it = models_.find(sha256);
  return it == models_.end() ? "" : it->second;
}

std::string TensorStore::cached_path(const std::string& sha256, const std::string& name,
                                     const model::SliceBytes& slice) const {
  // Tensor names come from the network: hex-encode them so no name can escape the folder.
  std::string encoded;
  for (unsigned char c : name) encoded += fmt::format("{:02x}", c);
  std::string path = cache_dir_ + "/tensors/" + sha256 + "/" + encoded;
  if (slice.whole) return path;
  // A slice's name: a hash of its runs, so another member's slice is never taken for this one.
  std::string runs;
  for (const model::ByteRun& r : slice.runs) runs += fmt::format("{},{},{},{};", r.offset, r.length, r.stride, r.count);
  uint8_t digest[SHA256_DIGEST_LENGTH];
  ::SHA256(reinterpret_cast<const uint8_t*>(runs.data()), runs.size(), digest);
  path += ".slice-";
  for (int i = 0; i < 12; ++i) path += fmt::format("{:02x}", digest[i]);
  return path;
}

std::string TensorStore::serving_path(const std::string& sha256, const gguf::TensorInfo& t,
                                      const model::SliceBytes& slice) const {
  for (const std::string& path : {cached_path(sha256, t.name, {}), cached_path(sha256, t.name, slice)}) {
    std::error_code ec;
    if (fs::file_size(path, ec) == t.nbytes && !ec) return path;
    if (slice.whole) break;
  }
  return "";
}

bool TensorStore::has_cached(const std::string& sha256, const gguf::TensorInfo& t, const model::SliceBytes& slice) const {
  return !serving_path(sha256, t, slice).empty();
}

Result<std::shared_ptr<const MappedFile>> TensorStore::map_cached(const std::string& sha256, const gguf::TensorInfo& t,
                                                                  const model::SliceBytes& slice) const {
  const std::string path = serving_path(sha256, t, slice);
  if (path.empty()) return make_error("tensor '{}' is not in the cache", t.name);
  return MappedFile::open(path);
}

TensorStore::Upload::Upload(TensorStore& store) : store_(store) {
  std::lock_guard lock(store.mu_);
  id_ = store.next_upload_++;
}

TensorStore::Upload::~Upload() {
  std::error_code ec;
  for (const auto& [path, written] : partial_) fs::remove(path, ec);
}

namespace {

// Writes `bytes` (stream offset `offset` of the slice) where they belong in the tensor's file.
bool scatter(int fd, const model::SliceBytes& slice, uint64_t offset, const std::string& bytes) {
  bool ok = true;
  model::for_each_piece(slice, offset, bytes.size(), [&](uint64_t at, uint64_t from, uint64_t n) {
    const char* src = bytes.data() + (from - offset);
    while (ok && n > 0) {
      const ssize_t k = ::pwrite(fd, src, n, static_cast<off_t>(at));
      if (k <= 0) ok = false;
      else src += k, at += static_cast<uint64_t>(k), n -= static_cast<uint64_t>(k);
    }
  });
  return ok;
}

}  // namespace

Status TensorStore::Upload::write_chunk(const std::string& sha256, const gguf::TensorInfo& t,
                                        const model::SliceBytes& slice, uint64_t offset, const std::string& bytes) {
  const std::string final_path = store_.cached_path(sha256, t.name, slice);
  const std::string partial = fmt::format("{}.partial-{}-{}", final_path, ::getpid(), id_);
  const uint64_t total = slice.bytes(t.nbytes);
  auto it = partial_.find(partial);
  const uint64_t written = offset == 0 || it == partial_.end() ? 0 : it->second;
  if (offset != written) {
    return make_error("tensor '{}': chunk at offset {} but {} bytes were received so far", t.name, offset, written);
  }
  if (bytes.size() > total - written) {
    return make_error("tensor '{}': chunk runs past the {}'s {} bytes", t.name, slice.whole ? "tensor" : "slice", total);
  }
  std::error_code ec;
  fs::create_directories(fs::path(final_path).parent_path(), ec);
  const int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (offset == 0 ? O_TRUNC : 0), 0644);
  if (fd < 0) return make_error("cache: cannot write {}", partial);
  // A slice's file has the tensor's size from the start; its holes take no disk and are never read.
  bool ok = offset != 0 || slice.whole || ::ftruncate(fd, static_cast<off_t>(t.nbytes)) == 0;
  ok = ok && scatter(fd, slice, offset, bytes);
  ok = ::close(fd) == 0 && ok;
  partial_[partial] = written + bytes.size();
  if (!ok) return make_error("cache: cannot write {}", partial);
  if (written + bytes.size() == total) {
    partial_.erase(partial);
    fs::rename(partial, final_path, ec);
    if (ec) return make_error("cache: cannot rename {}: {}", partial, ec.message());
  }
  return {};
}

}  // namespace strata::net
