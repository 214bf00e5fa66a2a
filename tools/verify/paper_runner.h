// Runs the paper protocol (paper_protocol.h) against a ProtocolBackend and reports it as the
// paper's table: relation x comparisons x identical, first difference; and as JSON with every
// comparison and every witness.
//
// A relation's status: "pass" (every comparison made, valid and identical), "MISMATCH" (some row
// differs), "invalid" (a witness failed: a cold call that hit the cache, a warm one that did not,
// a composition that never shared a step; a mismatch is not claimed then), "partial" (some
// comparisons cannot be made on this backend: never a pass), "not tested" (none can: the backend
// makes the relation impossible, and says why), "incomplete" (a request failed).
// Thread safety: one run at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tools/verify/paper_protocol.h"
#include "tools/verify/protocol_backend.h"

namespace vosti {

struct RowComparison {
  std::string label;   // "composition-7/prompt-12", "1025/64", "2/17", "partial-128"
  bool tested = true;  // false: the backend cannot make this comparison (`detail` says why)
  bool equal = false;
  std::string detail;  // where two rows differ (element, values, argmax), or why untested
};

struct Witness {
  std::string label;  // "composition-7: shared a step", "partial-128: warm hit"
  bool valid = true;
  std::string detail;
};

struct RelationResult {
  Relation relation = Relation::kBatch;
  int64_t expected = 0;
  std::vector<RowComparison> comparisons;
  std::vector<Witness> witnesses;
  std::string not_tested;  // why the backend makes the whole relation impossible
  std::string error;       // a failed request that stopped the relation
  double seconds = 0;

  int64_t num_tested() const;
  int64_t num_identical() const;
  std::string status() const;            // see the header comment
  std::string first_difference() const;  // the first differing comparison, "" if none
};

struct ProtocolReport {
  std::string model;
  std::string mode;    // "cpu", "cuda graphs (padded)", "cuda eager", "remote"
  std::string target;  // the backend's description
  Evidence evidence = Evidence::kFullRows;
  PaperPlan plan;  // what ran (prompts, cuts)
  std::vector<std::string> notes;
  std::vector<RelationResult> relations;
  double seconds = 0;
  bool passed() const;  // every relation "pass"
};

// Runs `relations` (default: all four) in the protocol's order; `progress` (may be null) gets a
// line per arm and relation. A report holds the relations it ran, and passes when they all pass.
ProtocolReport run_paper_protocol(const PaperPlan& plan, ProtocolBackend& backend,
                                  const std::function<void(const std::string&)>& progress = {},
                                  std::span<const Relation> relations = kRelations);
// The relations named by their keys ("batch", "chunk", "pd", "cache"); errors name an unknown one.
Result<std::vector<Relation>> parse_relations(const std::vector<std::string>& keys);

// The paper's table for each report (model x mode), with the evidence it rests on and its cuts.
std::string format_protocol_table(const std::vector<ProtocolReport>& reports);
// Everything: plan parameters, cuts, every comparison and witness, per relation.
nlohmann::ordered_json protocol_json(const std::vector<ProtocolReport>& reports);

}  // namespace vosti
