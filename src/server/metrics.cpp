#include "server/metrics.h"

#include <fmt/format.h>

namespace strata::server {
namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
}

}  // namespace

std::string Metrics::render(const runtime::Engine* engine, const Scheduler* scheduler) const {
  std::string out;
  metric(out, "strata_ready", "gauge", "1 once the model is loaded and warmed up", engine ? 1 : 0);
  metric(out, "strata_requests_total", "counter", "completion requests received", static_cast<double>(http_requests_));
  metric(out, "strata_requests_completed_total", "counter", "completion requests answered", static_cast<double>(completed_));
  metric(out, "strata_requests_failed_total", "counter", "completion requests that ended in an error",
         static_cast<double>(failed_));
  metric(out, "strata_prompt_tokens_total", "counter", "prompt tokens of answered requests", static_cast<double>(tokens_in_));
  metric(out, "strata_generated_tokens_total", "counter", "tokens generated for answered requests",
         static_cast<double>(tokens_out_));
  if (scheduler) {
    const SchedulerStats s = scheduler->stats();
    metric(out, "strata_requests_cancelled_total", "counter", "requests whose client went away before the end",
           static_cast<double>(s.requests_cancelled));
    metric(out, "strata_requests_resumed_total", "counter",
           "requests in flight when a node failed that went on after the cluster recovered",
           static_cast<double>(s.requests_resumed));
    metric(out, "strata_recoveries_total", "counter", "node failures recovered from under requests in flight",
           static_cast<double>(s.recoveries));
    metric(out, "strata_queue_depth", "gauge", "requests waiting for a slot", s.queue_depth);
    metric(out, "strata_active_slots", "gauge", "slots generating now", s.active_slots);
    metric(out, "strata_slots", "gauge", "slots (parallel sequences)", scheduler->n_slots());
    metric(out, "strata_prompt_tokens_computed_total", "counter", "prompt tokens decoded",
           static_cast<double>(s.prompt_tokens));
    metric(out, "strata_prompt_tokens_cached_total", "counter", "prompt tokens taken from a slot's cache instead",
           static_cast<double>(s.prompt_tokens_cached));
    metric(out, "strata_checkpoints_saved_total", "counter", "recurrent-state checkpoints saved",
           static_cast<double>(s.checkpoints_saved));
    metric(out, "strata_checkpoints_restored_total", "counter", "recurrent-state checkpoints a request resumed from",
           static_cast<double>(s.checkpoints_restored));
    metric(out, "strata_host_cache_stored_total", "counter", "slot sequences kept in host memory (--cache-ram)",
           static_cast<double>(s.host_cache.stored));
    metric(out, "strata_host_cache_restored_total", "counter", "kept sequences moved back into a slot",
           static_cast<double>(s.host_cache.restored));
    metric(out, "strata_host_cache_bytes", "gauge", "host memory the kept sequences take on the busiest node",
           static_cast<double>(s.host_cache.bytes));
    metric(out, "strata_host_cache_entries", "gauge", "sequences kept in host memory", s.host_cache.entries);
    metric(out, "strata_spec_decode_num_drafts_total", "counter", "speculative drafts checked (--spec-type)",
           static_cast<double>(s.spec.verifies));
    metric(out, "strata_spec_decode_num_draft_tokens_total", "counter", "drafted tokens checked",
           static_cast<double>(s.spec.drafted));
    metric(out, "strata_spec_decode_num_accepted_tokens_total", "counter", "drafted tokens kept",
           static_cast<double>(s.spec.accepted));
    if (!s.spec.accepted_at.empty()) {
      constexpr const char* kName = "strata_spec_decode_num_accepted_tokens_per_pos_total";
      out += fmt::format("# HELP {} drafted tokens kept, by position in the draft\n# TYPE {} counter\n", kName, kName);
      for (size_t i = 0; i < s.spec.accepted_at.size(); ++i) {
        out += fmt::format("{}{{position=\"{}\"}} {}\n", kName, i, s.spec.accepted_at[i]);
      }
    }
    metric(out, "strata_decode_calls_total", "counter", "engine calls (each decodes every active slot's next rows)",
           static_cast<double>(s.decode_calls));
    metric(out, "strata_busy_slots_per_decode", "gauge", "slots fed per engine call, on average",
           s.decode_calls > 0 ? static_cast<double>(s.decode_slots) / static_cast<double>(s.decode_calls) : 0);
    metric(out, "strata_decode_seconds_total", "counter", "time spent in decode calls", s.decode_seconds);
    metric(out, "strata_tokens_per_second", "gauge", "prompt and generated tokens per second of decode time",
           s.decode_seconds > 0 ? static_cast<double>(s.prompt_tokens + s.generated_tokens) / s.decode_seconds : 0);
  }
  if (engine) {
    out += "# HELP strata_node_up 1 when the node answers and holds its stage\n# TYPE strata_node_up gauge\n";
    out += "strata_node_up{node=\"local\"} 1\n";
    std::string latency =
        "# HELP strata_node_ping_seconds round trip of the last heartbeat\n# TYPE strata_node_ping_seconds gauge\n";
    for (const auto& h : engine->node_health()) {
      out += fmt::format("strata_node_up{{node=\"{}\"}} {}\n", h.node, h.reachable ? 1 : 0);
      latency += fmt::format("strata_node_ping_seconds{{node=\"{}\"}} {}\n", h.node, h.ping_ms / 1000.0);
    }
    out += latency;
  }
  return out;
}

}  // namespace strata::server
