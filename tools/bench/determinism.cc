#include "tools/bench/determinism.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"

namespace vosti::bench {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull, kFnvPrime = 1099511628211ull;

// FNV-1a over the 8 little-endian bytes of v.
uint64_t fnv_mix(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= kFnvPrime;
  }
  return h;
}

bool has_all_ids(const RequestRecord& r) {
  return static_cast<int64_t>(r.content.token_ids.size()) == r.num_output_tokens;
}

uint64_t mix_request(uint64_t h, const RequestRecord& r) {
  h = fnv_mix(h, static_cast<uint64_t>(r.index));
  h = fnv_mix(h, r.content.token_ids.size());
  for (int32_t id : r.content.token_ids) h = fnv_mix(h, static_cast<uint32_t>(id));
  return h;
}

std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

enum class Basis : uint8_t { kDigests, kIdsAndLogprobs, kPiecesAndLogprobs, kIds, kCounts };

const char* basis_name(Basis b) {
  switch (b) {
    case Basis::kDigests:
      return "token ids and logits digests (bit for bit)";
    case Basis::kIdsAndLogprobs:
      return "token ids and logprobs (no logits digests from this target)";
    case Basis::kPiecesAndLogprobs:
      return "token text and logprobs (no token ids or logits digests from this target)";
    case Basis::kIds:
      return "token ids (no logprobs or digests from this target)";
    case Basis::kCounts:
      return "output token counts only (the target returned no tokens)";
  }
  return "";
}

Basis basis_of(const ResponseContent& a, const ResponseContent& b, int64_t n_a, int64_t n_b) {
  const auto full = [](size_t size, int64_t n) { return static_cast<int64_t>(size) == n && n > 0; };
  if (full(a.digests.size(), n_a) && full(b.digests.size(), n_b) && full(a.token_ids.size(), n_a) &&
      full(b.token_ids.size(), n_b))
    return Basis::kDigests;
  const bool logprobs = full(a.logprobs.size(), n_a) && full(b.logprobs.size(), n_b);
  if (full(a.token_ids.size(), n_a) && full(b.token_ids.size(), n_b))
    return logprobs ? Basis::kIdsAndLogprobs : Basis::kIds;
  if (logprobs && full(a.token_pieces.size(), n_a) && full(b.token_pieces.size(), n_b))
    return Basis::kPiecesAndLogprobs;
  return Basis::kCounts;
}

// What differs at position p ("" if nothing).
std::string position_difference(const ResponseContent& a, const ResponseContent& b, size_t p, Basis basis) {
  char buf[256];
  const bool ids = basis == Basis::kDigests || basis == Basis::kIdsAndLogprobs || basis == Basis::kIds;
  if (ids && a.token_ids[p] != b.token_ids[p]) {
    std::snprintf(buf, sizeof buf, "token %d vs %d", a.token_ids[p], b.token_ids[p]);
    return buf;
  }
  if (basis == Basis::kPiecesAndLogprobs && a.token_pieces[p] != b.token_pieces[p])
    return "token '" + a.token_pieces[p] + "' vs '" + b.token_pieces[p] + "'";
  if (basis == Basis::kDigests && a.digests[p] != b.digests[p])
    return "logits digest " + a.digests[p] + " vs " + b.digests[p];
  if ((basis == Basis::kIdsAndLogprobs || basis == Basis::kPiecesAndLogprobs) && a.logprobs[p] != b.logprobs[p]) {
    std::snprintf(buf, sizeof buf, "logprob %.17g vs %.17g", a.logprobs[p], b.logprobs[p]);
    return buf;
  }
  return "";
}

}  // namespace

DeterminismReport compare_runs(std::span<const RequestRecord> a, std::span<const RequestRecord> b) {
  VOSTI_CHECK(a.size() == b.size());
  DeterminismReport report;
  Basis weakest = Basis::kDigests;
  for (size_t i = 0; i < a.size(); ++i) {
    const RequestRecord& x = a[i];
    const RequestRecord& y = b[i];
    if (!x.success || !y.success) {
      ++report.num_not_compared;
      continue;
    }
    ++report.num_requests_compared;
    const Basis basis = basis_of(x.content, y.content, x.num_output_tokens, y.num_output_tokens);
    weakest = std::max(weakest, basis);
    bool differs = false;
    const std::string who = "request " + std::to_string(x.index);
    if (x.num_output_tokens != y.num_output_tokens) {
      differs = true;
      report.mismatches.push_back(who + ": " + std::to_string(x.num_output_tokens) + " vs " +
                                  std::to_string(y.num_output_tokens) + " output tokens");
    }
    const int64_t common = std::min(x.num_output_tokens, y.num_output_tokens);
    if (basis != Basis::kCounts) {
      for (int64_t p = 0; p < common; ++p) {
        const std::string d = position_difference(x.content, y.content, static_cast<size_t>(p), basis);
        if (d.empty()) continue;
        differs = true;
        report.mismatches.push_back(who + " position " + std::to_string(p) + ": " + d);
      }
    }
    report.num_positions_compared += common;
    report.num_requests_differing += differs ? 1 : 0;
  }
  report.compared = basis_name(weakest);
  report.weaker_than_digests = weakest != Basis::kDigests;
  return report;
}

std::optional<OutputsDigest> outputs_digest(std::span<const RequestRecord> records) {
  OutputsDigest d;
  uint64_t h = kFnvOffset;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    if (!has_all_ids(r)) return std::nullopt;
    h = mix_request(h, r);
    ++d.num_requests;
    d.num_tokens += r.num_output_tokens;
  }
  if (d.num_requests == 0) return std::nullopt;
  d.hex = hex64(h);
  return d;
}

std::string output_digest(const RequestRecord& record) {
  return has_all_ids(record) ? hex64(mix_request(kFnvOffset, record)) : "";
}

}  // namespace vosti::bench
