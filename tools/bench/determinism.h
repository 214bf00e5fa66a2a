// --check-determinism: the same workload run twice under different concurrency and arrival
// order, every response compared position by position. With Vosti (in-process or its server)
// each position's token id and 128-bit logits digest are compared, i.e. the logits bit for
// bit; a peer server without digests is compared on what it returns: token ids or token text,
// and the logprobs as printed (a weaker check, and the report says so).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
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

// The output tokens of a run as one digest, to compare runs that --check-determinism cannot pair:
// two commands with other engine options (speculation on and off, another thread count) on the
// same workload print equal digests iff every answered request has the same output token ids.
// FNV-1a 64 over each answered request's (index, token count, token ids), in index order.
struct OutputsDigest {
  std::string hex;  // 16 hex digits
  int64_t num_requests = 0;
  int64_t num_tokens = 0;
};
// nullopt when an answered request has no (or not all of its) token ids: the target did not
// report them.
std::optional<OutputsDigest> outputs_digest(std::span<const RequestRecord> records);
// One request's part of it ("" when its token ids are missing).
std::string output_digest(const RequestRecord& record);

}  // namespace vosti::bench
