#include "server/slot_actions.h"

#include <fmt/format.h>

#include <filesystem>

#include "server/chat_turn.h"

namespace strata::server {
namespace {

using nlohmann::json;

SlotActionAnswer failed(const ApiError& e) { return {e.status, e.body()}; }

}  // namespace

std::optional<ApiError> check_slot_filename(const std::string& name) {
  const bool plain = !name.empty() && name.size() <= 255 && name[0] != '.' &&
                     name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
                         std::string::npos;
  if (plain) return std::nullopt;
  return bad_field("filename", "'filename' must be a plain file name (1-255 of A-Z a-z 0-9 . _ -, not starting with '.')");
}

SlotActionAnswer slot_action_answer(Scheduler& scheduler, const std::string& save_dir, int32_t id, const std::string& action,
                                    const std::string& body) {
  if (save_dir.empty() && action != "erase") {
    ApiError e;
    e.status = 501;
    e.type = "not_supported_error";
    e.message = "this server saves no slots: start it with --slot-save-path DIR";
    return failed(e);
  }
  Scheduler::SlotAction kind;
  if (action == "save") kind = Scheduler::SlotAction::kSave;
  else if (action == "restore") kind = Scheduler::SlotAction::kRestore;
  else if (action == "erase") kind = Scheduler::SlotAction::kErase;
  else return failed(bad_field("action", "'action' must be save, restore or erase, not '" + action.substr(0, 64) + "'"));
  std::string filename;
  if (kind != Scheduler::SlotAction::kErase) {
    json j;
    if (auto e = parse_body(body, j)) return failed(*e);
    if (auto e = need_string(j, "filename", filename)) return failed(*e);
    if (auto e = check_slot_filename(filename)) return failed(*e);
  }
  const std::string path = kind == Scheduler::SlotAction::kErase ? "" : (std::filesystem::path(save_dir) / filename).string();
  auto r = scheduler.slot_action(id, kind, path);
  if (!r.ok()) {
    const int status = r.error().code == ErrorCode::kNotFound ? 404 : r.error().code == ErrorCode::kInvalidArgument ? 400 : 500;
    return failed(engine_error(r.error().code, r.error().message, status));
  }
  switch (kind) {
    case Scheduler::SlotAction::kSave:
      return {200, {{"id_slot", id}, {"filename", filename}, {"n_saved", r->n_tokens}, {"n_written", r->bytes},
                    {"timings", {{"save_ms", r->ms}}}}};
    case Scheduler::SlotAction::kRestore:
      return {200, {{"id_slot", id}, {"filename", filename}, {"n_restored", r->n_tokens}, {"n_read", r->bytes},
                    {"timings", {{"restore_ms", r->ms}}}}};
    case Scheduler::SlotAction::kErase: return {200, {{"id_slot", id}, {"n_erased", r->n_tokens}}};
  }
  return {500, {}};
}

}  // namespace strata::server
