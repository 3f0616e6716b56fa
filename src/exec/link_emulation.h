// A LAN's latency and line rate on a tensor group's data links, for measurements with every member
// on one machine where sch_netem is missing (scripts/lan.sh needs it). A wrapper around the group's
// collective, so no transport carries test code: each peer's data counts as arrived a one-way delay
// plus its time at the line rate after the peer sent it, and the receiver goes on with its idle work
// meanwhile, as behind a NIC. Every member wraps its own end (STRATA_LINK_DELAY_US, STRATA_LINK_MBIT);
// send times travel with the data, read on one steady clock (the members share a machine).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "model/collective.h"

namespace strata::exec {

struct LinkEmulation {
  double delay_us = 0;  // one way
  double mbit = 0;      // line rate; 0: unlimited
  bool active() const { return delay_us > 0 || mbit > 0; }
  // How long a frame of `bytes` is on the wire.
  std::chrono::nanoseconds wire(uint64_t bytes) const;
  // From STRATA_LINK_DELAY_US (0..10^6) and STRATA_LINK_MBIT (0..10^6); values outside are clamped.
  static LinkEmulation from_env();
};

// `inner` as member `self` of `size` sees it through the emulated links; `inner` itself when the
// emulation is off. No emulated wire holds data past `timeout_ms` after the call began.
std::unique_ptr<model::Collective> emulate_links(std::unique_ptr<model::Collective> inner, int32_t self, int32_t size,
                                                 const LinkEmulation& emulation, int32_t timeout_ms);

}  // namespace strata::exec
