// The paper protocol's verdicts, table and JSON (paper_runner.h).
#include <algorithm>
#include <cstdio>

#include "tools/verify/paper_runner.h"

namespace vosti {

const char* evidence_name(Evidence e) {
  switch (e) {
    case Evidence::kFullRows:
      return "full f32 logit rows, compared byte for byte";
    case Evidence::kDigests:
      return "logits digests (XXH3-128 of each full f32 row), compared as strings";
    case Evidence::kTopLogprobs:
      return "token ids and top-20 logprobs only (WEAKER: rows that differ below the top 20 pass)";
  }
  return "?";
}

int64_t RelationResult::num_tested() const {
  return std::count_if(comparisons.begin(), comparisons.end(), [](const RowComparison& c) { return c.tested; });
}

int64_t RelationResult::num_identical() const {
  return std::count_if(comparisons.begin(), comparisons.end(),
                       [](const RowComparison& c) { return c.tested && c.equal; });
}

std::string RelationResult::status() const {
  if (!not_tested.empty()) return "not tested";
  if (!error.empty() || static_cast<int64_t>(comparisons.size()) != expected) return "incomplete";
  if (std::any_of(witnesses.begin(), witnesses.end(), [](const Witness& w) { return !w.valid; })) return "invalid";
  if (num_identical() != num_tested()) return "MISMATCH";
  return num_tested() == expected ? "pass" : "partial";
}

std::string RelationResult::first_difference() const {
  for (const RowComparison& c : comparisons)
    if (c.tested && !c.equal) return c.label + ": " + c.detail;
  return "";
}

bool ProtocolReport::passed() const {
  return !relations.empty() &&
         std::all_of(relations.begin(), relations.end(), [](const RelationResult& r) { return r.status() == "pass"; });
}

namespace {

std::string seed_hex(uint64_t seed) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llX", static_cast<unsigned long long>(seed));
  return buf;
}

// Why a relation is not a pass, in one line: the first failed witness, the untested reason, the error.
std::string reason(const RelationResult& r) {
  if (!r.not_tested.empty()) return r.not_tested;
  if (!r.error.empty()) return r.error;
  for (const Witness& w : r.witnesses)
    if (!w.valid) return "witness " + w.label + " failed (" + w.detail + ")";
  if (std::string d = r.first_difference(); !d.empty()) return d;
  for (const RowComparison& c : r.comparisons)
    if (!c.tested) return "untested: " + c.detail;
  return "";
}

}  // namespace

std::string format_protocol_table(const std::vector<ProtocolReport>& reports) {
  std::string out;
  char line[1024];
  for (const ProtocolReport& rep : reports) {
    out += "paper protocol (seed " + seed_hex(rep.plan.seed) + "): model " + rep.model + ", " + rep.mode + "\n";
    out += "  target:   " + rep.target + "\n";
    out += "  evidence: " + std::string(evidence_name(rep.evidence)) + "\n";
    std::snprintf(line, sizeof line, "  %-18s %11s %7s %9s  %-10s %s\n", "relation", "comparisons", "tested",
                  "identical", "status", "first difference / why");
    out += line;
    int64_t expected = 0, tested = 0, identical = 0;
    for (const RelationResult& r : rep.relations) {
      expected += r.expected;
      tested += r.num_tested();
      identical += r.num_identical();
      std::snprintf(line, sizeof line, "  %-18s %11lld %7lld %9lld  %-10s %s\n", relation_name(r.relation),
                    static_cast<long long>(r.expected), static_cast<long long>(r.num_tested()),
                    static_cast<long long>(r.num_identical()), r.status().c_str(), reason(r).substr(0, 160).c_str());
      out += line;
    }
    std::snprintf(line, sizeof line, "  %-18s %11lld %7lld %9lld  %-10s (%.0f s)\n", "all",
                  static_cast<long long>(expected), static_cast<long long>(tested), static_cast<long long>(identical),
                  rep.passed() ? "pass" : "FAIL", rep.seconds);
    out += line;
    if (!rep.plan.cuts.empty()) {
      out += "  adapted run: " + std::to_string(rep.plan.cuts.size()) + " prompt lengths cut to fit a context of " +
             std::to_string(rep.plan.context) + " tokens (";
      for (size_t i = 0; i < rep.plan.cuts.size() && i < 4; ++i)
        out += (i ? ", " : "") + rep.plan.cuts[i].what + " " + std::to_string(rep.plan.cuts[i].paper) + " -> " +
               std::to_string(rep.plan.cuts[i].used);
      out += rep.plan.cuts.size() > 4 ? ", ...; the JSON lists them all)\n" : ")\n";
    }
    for (const std::string& n : rep.notes) out += "  note: " + n + "\n";
  }
  return out;
}

nlohmann::ordered_json protocol_json(const std::vector<ProtocolReport>& reports) {
  using nlohmann::ordered_json;
  ordered_json doc;
  doc["tool"] = "vosti verify --protocol paper";
  doc["schema_version"] = 1;
  ordered_json all = ordered_json::array();
  for (const ProtocolReport& rep : reports) {
    ordered_json j;
    j["model"] = rep.model;
    j["mode"] = rep.mode;
    j["target"] = rep.target;
    j["evidence"] = evidence_name(rep.evidence);
    j["seed"] = seed_hex(rep.plan.seed);
    j["context"] = rep.plan.context;
    j["sliding_window"] = rep.plan.window;
    j["passed"] = rep.passed();
    j["seconds"] = rep.seconds;
    j["cuts"] = ordered_json::array();
    for (const LengthCut& c : rep.plan.cuts)
      j["cuts"].push_back({{"what", c.what}, {"paper", c.paper}, {"used", c.used}});
    j["notes"] = rep.notes;
    j["relations"] = ordered_json::array();
    for (const RelationResult& r : rep.relations) {
      ordered_json rj = {{"relation", relation_key(r.relation)},
                         {"name", relation_name(r.relation)},
                         {"expected", r.expected},
                         {"tested", r.num_tested()},
                         {"identical", r.num_identical()},
                         {"status", r.status()},
                         {"first_difference", r.first_difference()},
                         {"not_tested", r.not_tested},
                         {"error", r.error},
                         {"seconds", r.seconds}};
      rj["comparisons"] = ordered_json::array();
      for (const RowComparison& c : r.comparisons)
        rj["comparisons"].push_back(
            {{"label", c.label}, {"tested", c.tested}, {"equal", c.equal}, {"detail", c.detail}});
      rj["witnesses"] = ordered_json::array();
      for (const Witness& w : r.witnesses)
        rj["witnesses"].push_back({{"label", w.label}, {"valid", w.valid}, {"detail", w.detail}});
      j["relations"].push_back(std::move(rj));
    }
    all.push_back(std::move(j));
  }
  doc["reports"] = std::move(all);
  return doc;
}

}  // namespace vosti
