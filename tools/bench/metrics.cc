#include "tools/bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace vosti::bench {

double percentile(std::span<const double> sorted, double p) {
  VOSTI_CHECK(!sorted.empty());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  const double n = static_cast<double>(values.size());
  d.count = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double sq = 0;
  for (double v : values) sq += (v - d.mean) * (v - d.mean);
  d.std = std::sqrt(sq / n);  // population std, as numpy's default
  d.median = percentile(values, 50);
  d.p90 = percentile(values, 90);
  d.p99 = percentile(values, 99);
  d.min = values.front();
  d.max = values.back();
  return d;
}

std::optional<double> ttft_s(const RequestRecord& r) {
  if (!r.success || r.delivery_s.empty()) return std::nullopt;
  return r.delivery_s.front() - r.send_s;
}

std::optional<double> tpot_s(const RequestRecord& r) {
  if (!r.success || r.delivery_s.empty() || r.num_output_tokens < 2) return std::nullopt;
  return (r.delivery_s.back() - r.delivery_s.front()) / static_cast<double>(r.num_output_tokens - 1);
}

std::optional<double> e2e_s(const RequestRecord& r) {
  if (!r.success) return std::nullopt;
  return r.end_s - r.send_s;
}

std::vector<double> itl_s(const RequestRecord& r) {
  std::vector<double> gaps;
  if (!r.success) return gaps;
  for (size_t i = 1; i < r.delivery_s.size(); ++i) gaps.push_back(r.delivery_s[i] - r.delivery_s[i - 1]);
  return gaps;
}

double records_span_s(std::span<const RequestRecord> records) {
  double first = std::numeric_limits<double>::infinity(), last = -std::numeric_limits<double>::infinity();
  for (const RequestRecord& r : records) {
    if (!r.sent) continue;
    first = std::min(first, r.send_s);
    last = std::max(last, r.end_s);
  }
  return last > first ? last - first : 1e-9;
}

BenchMetrics compute_metrics(std::span<const RequestRecord> records, double duration_s) {
  VOSTI_CHECK(duration_s > 0);
  BenchMetrics m;
  m.num_requests = static_cast<int64_t>(records.size());
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t cached = 0, prompt_with_cache_report = 0;
  bool any_cache_report = false;
  for (const RequestRecord& r : records) {
    if (!r.sent) {
      ++m.num_not_sent;
      continue;
    }
    if (!r.success) {
      ++m.num_failed;
      continue;
    }
    ++m.num_completed;
    m.total_input_tokens += r.num_prompt_tokens;
    m.total_output_tokens += r.num_output_tokens;
    if (r.num_cached_tokens >= 0) {
      any_cache_report = true;
      cached += r.num_cached_tokens;
      prompt_with_cache_report += r.num_prompt_tokens;
    }
    if (auto t = ttft_s(r)) ttft.push_back(*t * 1e3);
    if (auto t = tpot_s(r)) tpot.push_back(*t * 1e3);
    if (auto t = e2e_s(r)) e2e.push_back(*t * 1e3);
    for (double g : itl_s(r)) itl.push_back(g * 1e3);
  }
  m.request_throughput = static_cast<double>(m.num_completed) / duration_s;
  m.input_throughput = static_cast<double>(m.total_input_tokens) / duration_s;
  m.output_throughput = static_cast<double>(m.total_output_tokens) / duration_s;
  m.total_throughput = m.input_throughput + m.output_throughput;
  if (any_cache_report && prompt_with_cache_report > 0) {
    m.cached_token_fraction = static_cast<double>(cached) / static_cast<double>(prompt_with_cache_report);
  }
  m.ttft_ms = summarize(std::move(ttft));
  m.tpot_ms = summarize(std::move(tpot));
  m.itl_ms = summarize(std::move(itl));
  m.e2e_ms = summarize(std::move(e2e));
  return m;
}

}  // namespace vosti::bench
