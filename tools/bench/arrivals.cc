#include "tools/bench/arrivals.h"

#include <cmath>
#include <random>

#include "core/check.h"

namespace vosti::bench {

std::vector<double> arrival_times(int64_t num_requests, const ArrivalConfig& config) {
  VOSTI_CHECK(config.request_rate > 0 && config.burstiness > 0);
  std::vector<double> times(static_cast<size_t>(std::max<int64_t>(num_requests, 0)), 0.0);
  if (std::isinf(config.request_rate) || times.empty()) return times;
  // The stream is keyed by the seed alone (not by the prompt generator's draws).
  std::mt19937_64 rng(config.seed ^ 0x9e3779b97f4a7c15ull);
  const double mean_gap = 1.0 / config.request_rate;
  std::gamma_distribution<double> gamma(config.burstiness, mean_gap / config.burstiness);
  double t = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    double gap;
    if (config.burstiness == 1.0) {
      // Exponential by inversion: u in (0, 1] from 53 random bits.
      const double u = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
      gap = -std::log(u) * mean_gap;
    } else {
      gap = gamma(rng);
    }
    t += gap;
    times[i] = t;
  }
  return times;
}

}  // namespace vosti::bench
