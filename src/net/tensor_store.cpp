#include "net/tensor_store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

std::string TensorStore::cached_path(const std::string& sha256, const std::string& name) const {
  // Tensor names come from the network: hex-encode them so no name can escape the folder.
  std::string encoded;
  for (unsigned char c : name) encoded += fmt::format("{:02x}", c);
  return cache_dir_ + "/tensors/" + sha256 + "/" + encoded;
}

bool TensorStore::has_cached(const std::string& sha256, const gguf::TensorInfo& t) const {
  std::error_code ec;
  const auto size = fs::file_size(cached_path(sha256, t.name), ec);
  return !ec && size == t.nbytes;
}

Result<std::shared_ptr<const MappedFile>> TensorStore::map_cached(const std::string& sha256, const gguf::TensorInfo& t) const {
  if (!has_cached(sha256, t)) return make_error("tensor '{}' is not in the cache", t.name);
  return MappedFile::open(cached_path(sha256, t.name));
}

TensorStore::Upload::Upload(TensorStore& store) : store_(store) {
  std::lock_guard lock(store.mu_);
  id_ = store.next_upload_++;
}

TensorStore::Upload::~Upload() {
  std::error_code ec;
  for (const auto& [path, written] : partial_) fs::remove(path, ec);
}

Status TensorStore::Upload::write_chunk(const std::string& sha256, const gguf::TensorInfo& t, uint64_t offset,
                                        const std::string& bytes) {
  const std::string final_path = store_.cached_path(sha256, t.name);
  const std::string partial = fmt::format("{}.partial-{}-{}", final_path, ::getpid(), id_);
  auto it = partial_.find(partial);
  const uint64_t written = offset == 0 || it == partial_.end() ? 0 : it->second;
  if (offset != written) {
    return make_error("tensor '{}': chunk at offset {} but {} bytes were received so far", t.name, offset, written);
  }
  if (bytes.size() > t.nbytes - written) {
    return make_error("tensor '{}': chunk runs past the tensor's {} bytes", t.name, t.nbytes);
  }
  std::error_code ec;
  fs::create_directories(fs::path(final_path).parent_path(), ec);
  std::ofstream out(partial, offset == 0 ? std::ios::binary | std::ios::trunc : std::ios::binary | std::ios::app);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  partial_[partial] = written + bytes.size();
  if (!out) return make_error("cache: cannot write {}", partial);
  if (written + bytes.size() == t.nbytes) {
    partial_.erase(partial);
    fs::rename(partial, final_path, ec);
    if (ec) return make_error("cache: cannot rename {}: {}", partial, ec.message());
  }
  return {};
}

}  // namespace strata::net
