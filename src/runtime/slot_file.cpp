// Engine's slot files: one file per saved slot, written by the coordinator with every node's share.
// Layout (little-endian): "STRATA-SLOT/1", the fingerprint (u32 length + text), the tokens (u64 count
// + i32 each), the checkpoint positions (u32 count + i32 each), then per node its share (u64 length +
// memory::encode_seq bytes). Reading checks every count against the file's size before it allocates.
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "base/bounded_reader.h"
#include "runtime/engine.h"

namespace strata::runtime {
namespace {

constexpr std::string_view kMagic = "STRATA-SLOT/1";
constexpr int32_t kSlotStash = std::numeric_limits<int32_t>::max();  // the stash id slot files go through

template <typename T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A file as a BoundedReader source: its size, read as it goes.
struct FileSource {
  std::ifstream* in;
  uint64_t size_left;
  uint64_t left() const { return size_left; }
  Status read(void* out, uint64_t n) {
    if (!in->read(static_cast<char*>(out), static_cast<std::streamsize>(n))) return make_error("cannot read the slot file");
    size_left -= n;
    return {};
  }
};

}  // namespace

std::string Engine::slot_fingerprint() const {
  const model::HParams& hp = hparams();
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(options_.model_path, ec);
  std::string f = fmt::format("model {} n_layer={} n_embd={} n_vocab={} bytes={}; ctx {} per sequence", hp.arch, hp.n_layer,
                              hp.n_embd, hp.n_vocab, ec ? 0 : file_size, n_ctx_per_seq());
  for (size_t n = 0; n < plan_.node_stages.size(); ++n) {
    const model::StageConfig& s = plan_.node_stages[n];
    std::string layers;
    for (size_t il = 0; il < s.owned.size(); ++il) layers += s.owned[il] ? '1' : '0';
    f += fmt::format("; node {} layers {} kv {}/{} slice {}/{} checkpoints {}", n, layers, memory::kv_type_name(s.type_k),
                     memory::kv_type_name(s.type_v), s.shard.index, s.shard.count, s.n_checkpoints);
  }
  return f;
}

Result<uint64_t> Engine::save_slot(int32_t seq, const SlotContents& contents, const std::string& path) {
  STRATA_TRY(stash(seq, kSlotStash));
  std::string out(kMagic);
  const std::string fingerprint = slot_fingerprint();
  put<uint32_t>(out, static_cast<uint32_t>(fingerprint.size()));
  out += fingerprint;
  put<uint64_t>(out, contents.tokens.size());
  out.append(reinterpret_cast<const char*>(contents.tokens.data()), contents.tokens.size() * sizeof(text::Token));
  put<uint32_t>(out, static_cast<uint32_t>(contents.checkpoints.size()));
  out.append(reinterpret_cast<const char*>(contents.checkpoints.data()), contents.checkpoints.size() * sizeof(int32_t));
  put<uint32_t>(out, static_cast<uint32_t>(nodes_.size()));
  Status failed;
  for (auto& node : nodes_) {
    auto share = node->read_stash(kSlotStash);
    if (!share.ok()) {
      failed = std::move(share).error();
      break;
    }
    put<uint64_t>(out, share->size());
    out.append(reinterpret_cast<const char*>(share->data()), share->size());
  }
  STRATA_TRY(drop_stash(kSlotStash));
  STRATA_TRY(std::move(failed));
  const std::string tmp = path + ".partial";
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    if (!file.write(out.data(), static_cast<std::streamsize>(out.size())) || !file.flush()) {
      return make_error("cannot write {}", tmp);
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // a reader never sees half a file
  if (ec) return make_error("cannot move {} to {}: {}", tmp, path, ec.message());
  return static_cast<uint64_t>(out.size());
}

Result<Engine::SlotContents> Engine::restore_slot(int32_t seq, const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return make_error(ErrorCode::kNotFound, "no slot file {}: {}", path, ec.message());
  std::ifstream file(path, std::ios::binary);
  BoundedReader<FileSource> r(FileSource{&file, size}, path);
  std::string magic(kMagic.size(), '\0');
  STRATA_TRY(r.bytes(magic.data(), magic.size()));
  if (magic != kMagic) return make_error(ErrorCode::kInvalidArgument, "{} is not a Strata slot file", path);
  STRATA_ASSIGN(const uint32_t fingerprint_size, r.value<uint32_t>());
  STRATA_ASSIGN(const auto fingerprint, r.items<char>(fingerprint_size));
  const std::string mine = slot_fingerprint();
  if (std::string(fingerprint.begin(), fingerprint.end()) != mine) {
    return make_error(ErrorCode::kInvalidArgument, "{} was saved with another model or plan: it has '{}', this server '{}'",
                      path, std::string(fingerprint.begin(), fingerprint.end()), mine);
  }
  SlotContents c;
  STRATA_ASSIGN(const uint64_t n_tokens, r.value<uint64_t>());
  if (n_tokens >= static_cast<uint64_t>(n_ctx_per_seq())) {
    return make_error(ErrorCode::kInvalidArgument, "{}: {} tokens do not fit a slot", path, n_tokens);
  }
  STRATA_ASSIGN(c.tokens, r.items<text::Token>(n_tokens));
  STRATA_ASSIGN(const uint32_t n_checkpoints, r.value<uint32_t>());
  STRATA_ASSIGN(c.checkpoints, r.items<int32_t>(n_checkpoints));
  STRATA_ASSIGN(const uint32_t n_nodes, r.value<uint32_t>());
  if (n_nodes != nodes_.size()) return make_error(ErrorCode::kInvalidArgument, "{}: {} nodes, this plan {}", path, n_nodes, nodes_.size());
  Status failed;
  for (size_t n = 0; n < nodes_.size() && failed.ok(); ++n) {
    auto share_size = r.value<uint64_t>();
    auto share = share_size.ok() ? r.items<uint8_t>(*share_size) : Result<std::vector<uint8_t>>(share_size.error());
    // Bounded by the file here, then by the node's --cache-ram share before it buffers anything.
    failed = share.ok() ? nodes_[n]->write_stash(kSlotStash, *share) : Status(std::move(share).error());
  }
  if (failed.ok() && r.left() != 0) failed = make_error(ErrorCode::kInvalidArgument, "{}: bytes after its end", path);
  if (failed.ok()) failed = unstash(kSlotStash, seq);
  if (!failed.ok()) {
    (void)drop_stash(kSlotStash);
    return std::move(failed).error();
  }
  return c;
}

}  // namespace strata::runtime
