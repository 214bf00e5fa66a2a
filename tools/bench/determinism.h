// --check-determinism: the same workload run twice under different concurrency and arrival
// order, every response compared position by position. With Vosti (in-process or its server)
// each position's token id and 128-bit logits digest are compared, i.e. the logits bit for
// bit; a peer server without digests is compared on what it returns: token ids or token text,
// and the logprobs as printed (a weaker check, and the report says so).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tools/bench/metrics.h"

namespace vosti::bench {

struct DeterminismReport {
  int64_t num_requests_compared = 0;   // answered in both runs
  int64_t num_positions_compared = 0;  // output positions present in both
  int64_t num_requests_differing = 0;
  int64_t num_not_compared = 0;         // failed or unsent in either run
  std::string compared;                 // what was compared, e.g. "token ids and logits digests"
  bool weaker_than_digests = false;     // some request had no digests
  std::vector<std::string> mismatches;  // one line per differing position (and per length difference)
  bool identical() const { return num_requests_differing == 0 && num_not_compared == 0 && num_requests_compared > 0; }
};

// Compares records of the same workload (same indices). REQUIRES: a.size() == b.size().
DeterminismReport compare_runs(std::span<const RequestRecord> a, std::span<const RequestRecord> b);

}  // namespace vosti::bench
