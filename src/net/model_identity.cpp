#include "net/model_identity.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

namespace strata::net {
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) s[2 * i] = digits[p[i] >> 4], s[2 * i + 1] = digits[p[i] & 15];
  return s;
}

std::string sha256_of_string(const std::string& s) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(s.data(), s.size(), md, &len, EVP_sha256(), nullptr);
  return hex(md, len);
}

}  // namespace

Result<std::string> file_sha256(const std::string& path, const std::string& cache_dir) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error("{}: cannot stat", path);
  std::string memo;
  if (!cache_dir.empty()) {
    const std::string key = sha256_of_string(fmt::format("{}|{}|{}.{}", std::filesystem::absolute(path).string(),
                                                         st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec));
    memo = cache_dir + "/hashes/" + key;
    std::ifstream in(memo);
    std::string cached;
    if (in >> cached && cached.size() == 64) return cached;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("{}: cannot open", path);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  const std::string digest = hex(md, len);
  if (!memo.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(memo).parent_path(), ec);
    std::ofstream(memo) << digest << "\n";
  }
  return digest;
}

Result<std::vector<uint8_t>> metadata_image(const gguf::File& file) {
  gguf::Writer w;
  for (const gguf::KeyValue& kv : file.kvs()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) continue;  // workers never tokenize
    w.copy_kv(kv);
  }
  return w.write_to_memory();
}

void to_proto(const gguf::TensorInfo& info, v1::TensorSpec* spec) {
  spec->set_name(info.name);
  spec->set_type(static_cast<int32_t>(info.type));
  for (uint32_t i = 0; i < info.n_dims; ++i) spec->add_ne(info.ne[i]);
  spec->set_nbytes(info.nbytes);
}

Result<gguf::TensorInfo> from_proto(const v1::TensorSpec& spec) {
  gguf::TensorInfo t;
  t.name = spec.name();
  if (t.name.empty() || t.name.size() > 63) return make_error("tensor name '{}' is empty or too long", t.name);
  const auto type = dtype_info(spec.type());
  if (!type) return make_error("tensor '{}': unknown type id {}", t.name, spec.type());
  t.type = static_cast<DType>(spec.type());
  if (spec.ne_size() < 1 || spec.ne_size() > 4) return make_error("tensor '{}': {} dimensions", t.name, spec.ne_size());
  t.n_dims = static_cast<uint32_t>(spec.ne_size());
  uint64_t elements = 1;
  for (int i = 0; i < spec.ne_size(); ++i) {
    const int64_t ne = spec.ne(i);
    if (ne < 0 || ne > (int64_t{1} << 40)) return make_error("tensor '{}': dimension {} out of range", t.name, ne);
    t.ne[i] = ne;
    if (ne != 0 && elements > (uint64_t{1} << 50) / static_cast<uint64_t>(ne)) {
      return make_error("tensor '{}': too many elements", t.name);
    }
    elements *= static_cast<uint64_t>(ne);
  }
  if (t.ne[0] % type->block_elems != 0) return make_error("tensor '{}': row not a multiple of the block", t.name);
  t.nbytes = elements / static_cast<uint64_t>(type->block_elems) * type->block_bytes;
  if (t.nbytes != spec.nbytes()) return make_error("tensor '{}': {} bytes declared, shape gives {}", t.name, spec.nbytes(), t.nbytes);
  return t;
}

}  // namespace strata::net
