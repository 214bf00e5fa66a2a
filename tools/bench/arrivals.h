// Arrival schedules of a benchmark run: when each request is sent, relative to the run's start.
// All at once (rate infinite), or a Poisson process at `request_rate` requests/s (exponential
// gaps; with burstiness != 1, gamma-distributed gaps of the same mean, as vLLM's --burstiness:
// < 1 burstier, > 1 more regular). Seeded: the same config gives the same schedule. Fixed
// concurrency is not a schedule but a cap the driver applies (RunOptions::max_concurrency).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace vosti::bench {

struct ArrivalConfig {
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1.0;                                        // gamma shape; 1: Poisson
  uint64_t seed = 0;
};

// [num_requests] non-decreasing send offsets in seconds; the first is 0.
// REQUIRES: request_rate > 0; burstiness > 0.
std::vector<double> arrival_times(int64_t num_requests, const ArrivalConfig& config);

}  // namespace vosti::bench
