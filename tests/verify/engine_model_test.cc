// The executable model's guards reject the bugs the Coq mutants plant (docs/VERIFICATION.md):
// a check the refinement test relies on must really check.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "verify/refinement/engine_model.h"

namespace vosti::model {
namespace {

BlockKey constant_hash(const std::vector<Token>&) { return BlockKey{42, 0}; }  // every prefix collides

Token first_token_sampler(const Value& lg, uint64_t seed, int32_t i, const std::vector<Token>&) {
  return static_cast<Token>((static_cast<uint64_t>(lg.prefix) + seed + static_cast<uint64_t>(i)) % 5);
}

// Rows computing positions [from, to) of request x.
std::vector<Row> rows(const EngineModel& m, RequestIdM x, int32_t from, int32_t to) {
  const Request& r = m.state().requests.at(x);
  const std::vector<Token> T = r.tokens();
  std::vector<Row> out;
  for (int32_t p = from; p < to; ++p)
    out.push_back(Row{x, false, p, T[static_cast<size_t>(p)], r.block_table, r.block_table});
  return out;
}

TEST(EngineModelTest, ANormalTraceKeepsTheInvariantAndEmitsFD) {
  EngineModel m(2, 4, &constant_hash, &first_token_sampler);
  ASSERT_EQ(m.step_arrive(1, {1, 2, 3}, 9), "");
  ASSERT_EQ(m.step_allocate(1, 3), "");
  ASSERT_EQ(m.step_allocate(1, 0), "");
  std::vector<Emission> out;
  std::vector<Row> batch = rows(m, 1, 0, 3);
  batch.insert(batch.begin() + 1, Row{0, true, 7, 0, {}, {}});  // a padding row
  ASSERT_EQ(m.step_forward(batch, &out), "");
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].logits, m.F_D({1, 2, 3}));
  ASSERT_EQ(m.step_register(1, 0, 3), "");
  EXPECT_EQ(m.check_inv(), "");
  // A second request with the same first block shares it through a (token-compared) hit.
  ASSERT_EQ(m.step_arrive(2, {1, 2, 4}, 9), "");
  ASSERT_EQ(m.step_hit(2, 3), "");
  EXPECT_EQ(m.state().ref_count[3], 2);
  EXPECT_EQ(m.check_inv(), "");
}

TEST(EngineModelTest, AVerifyChunkEmitsTheAcceptedRunAndRollsBackTheRest) {
  EngineModel m(2, 4, &constant_hash, &first_token_sampler);
  ASSERT_EQ(m.step_arrive(1, {1, 2, 3}, 9), "");
  for (BlockId b : {0, 1, 2}) ASSERT_EQ(m.step_allocate(1, b), "");
  const Token e0 = first_token_sampler(m.F_D({1, 2, 3}), 9, 0, {});
  const Token e1 = first_token_sampler(m.F_D({1, 2, 3, e0}), 9, 1, {});
  const Token wrong = static_cast<Token>((e1 + 1) % 5);
  ASSERT_EQ(m.step_draft(1, {e0, wrong}), "");  // e0 is accepted, wrong is not
  const std::vector<Token> seq = {1, 2, 3, e0, wrong};
  std::vector<Row> batch;
  for (int32_t p = 0; p < 5; ++p) batch.push_back(Row{1, false, p, seq[static_cast<size_t>(p)], {0, 1, 2}, {0, 1, 2}});
  std::vector<Emission> out;
  ASSERT_EQ(m.step_forward(batch, &out), "");
  ASSERT_EQ(out.size(), 2u);  // e0, then the row of the accepted draft e0 gives e1
  EXPECT_EQ(out[0].token, e0);
  EXPECT_EQ(out[1].token, e1);
  EXPECT_EQ(out[1].logits, m.F_D({1, 2, 3, e0}));
  const Request& r = m.state().requests.at(1);
  EXPECT_EQ(r.tokens(), (std::vector<Token>{1, 2, 3, e0, e1}));
  EXPECT_EQ(r.num_computed, 4);  // position 4 holds the rejected draft's KV: not computed
  EXPECT_EQ(m.check_inv(), "");
  EXPECT_NE(m.step_truncate(1, 1).find("drops computed positions"), std::string::npos);
  ASSERT_EQ(m.step_truncate(1, 2), "");  // the roll-back frees block 2 (position 4 only)
  EXPECT_EQ(m.state().ref_count[2], 0);
  EXPECT_EQ(m.check_inv(), "");
}

// Speculation with window-local KV: the verify chunk writes through both tables; the window
// table's roll-back may keep neither fewer entries than it released nor fewer than the computed
// positions need, and frees what it drops.
TEST(EngineModelTest, AWindowTableRollBackKeepsItsReleasedAndComputedEntries) {
  EngineModel m(2, 8, &constant_hash, &first_token_sampler, /*window=*/2);
  ASSERT_EQ(m.step_arrive(1, {1, 2, 3}, 9), "");
  for (BlockId b : {0, 1, 2}) ASSERT_EQ(m.step_allocate(1, b), "");
  for (BlockId b : {3, 4, 5}) ASSERT_EQ(m.step_window_allocate(1, b), "");
  const Token e0 = first_token_sampler(m.F_D({1, 2, 3}), 9, 0, {});
  const Token e1 = first_token_sampler(m.F_D({1, 2, 3, e0}), 9, 1, {});
  const Token wrong = static_cast<Token>((e1 + 1) % 5);
  ASSERT_EQ(m.step_draft(1, {e0, wrong}), "");
  const std::vector<Token> seq = {1, 2, 3, e0, wrong};
  std::vector<Row> batch;
  for (int32_t p = 0; p < 5; ++p) batch.push_back(Row{1, false, p, seq[static_cast<size_t>(p)], {0, 1, 2}, {3, 4, 5}});
  std::vector<Emission> out;
  ASSERT_EQ(m.step_forward(batch, &out), "");
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(m.state().requests.at(1).num_computed, 4);
  ASSERT_EQ(m.step_window_release(1), "");  // entry 0 ends before the window of position 4
  EXPECT_NE(m.step_window_release(1).find("inside the window"), std::string::npos);
  EXPECT_NE(m.step_window_truncate(1, 0).find("released"), std::string::npos);
  EXPECT_NE(m.step_window_truncate(1, 1).find("drops computed positions"), std::string::npos);
  ASSERT_EQ(m.step_window_truncate(1, 2), "");  // frees window block 5 (position 4 only)
  ASSERT_EQ(m.step_truncate(1, 2), "");
  EXPECT_EQ(m.state().ref_count[5], 0);
  EXPECT_EQ(m.state().ref_count[3], 0);
  EXPECT_EQ(m.state().ref_count[4], 1);
  EXPECT_EQ(m.check_inv(), "");
}

TEST(EngineModelTest, HitOnACollidingKeyWithOtherTokensIsRejected) {
  EngineModel m(2, 4, &constant_hash, &first_token_sampler);
  ASSERT_EQ(m.step_arrive(1, {1, 2, 3}, 0), "");
  ASSERT_EQ(m.step_allocate(1, 0), "");
  ASSERT_EQ(m.step_forward(rows(m, 1, 0, 2), nullptr), "");
  ASSERT_EQ(m.step_register(1, 0, 0), "");
  ASSERT_EQ(m.step_arrive(2, {5, 2, 3}, 0), "");
  EXPECT_NE(m.step_hit(2, 0).find("false hit"), std::string::npos);
  EXPECT_EQ(m.state().ref_count[0], 1);  // a rejected transition changes nothing
}

TEST(EngineModelTest, HitMatchingOnlyTheBlocksOwnTokensIsRejected) {
  EngineModel m(2, 8, &constant_hash, &first_token_sampler);
  ASSERT_EQ(m.step_arrive(1, {1, 2, 3, 4, 9}, 0), "");
  ASSERT_EQ(m.step_allocate(1, 0), "");
  ASSERT_EQ(m.step_allocate(1, 1), "");
  ASSERT_EQ(m.step_forward(rows(m, 1, 0, 4), nullptr), "");
  ASSERT_EQ(m.step_register(1, 1, 1), "");  // prefix [1 2 3 4]
  ASSERT_EQ(m.step_arrive(2, {5, 6, 3, 4, 9}, 0), "");
  ASSERT_EQ(m.step_allocate(2, 2), "");
  ASSERT_EQ(m.step_forward(rows(m, 2, 0, 2), nullptr), "");
  // Block 1's own tokens [3 4] equal request 2's second block, but the parent differs.
  EXPECT_NE(m.step_hit(2, 1).find("false hit"), std::string::npos);
}

TEST(EngineModelTest, SharingAPartialBlockIsRejected) {
  EngineModel m(2, 4, &constant_hash, &first_token_sampler);
  ASSERT_EQ(m.step_arrive(1, {1, 2, 3, 4}, 0), "");
  ASSERT_EQ(m.step_allocate(1, 0), "");
  ASSERT_EQ(m.step_allocate(1, 1), "");
  ASSERT_EQ(m.step_forward(rows(m, 1, 0, 3), nullptr), "");
  EXPECT_NE(m.step_register(1, 1, 1).find("partial block"), std::string::npos);
  EXPECT_EQ(m.step_register(1, 0, 0), "");
}

TEST(EngineModelTest, ReusingABlockBeforeItsRefCountReachesZeroIsRejected) {
  EngineModel m(2, 4, &constant_hash, &first_token_sampler);
  ASSERT_EQ(m.step_arrive(1, {1, 2}, 0), "");
  ASSERT_EQ(m.step_arrive(2, {3, 4}, 0), "");
  ASSERT_EQ(m.step_allocate(1, 2), "");
  EXPECT_NE(m.step_allocate(2, 2).find("ref count"), std::string::npos);
  ASSERT_EQ(m.step_release(1, false), "");  // preemption: now it may be reused
  EXPECT_EQ(m.step_allocate(2, 2), "");
  EXPECT_EQ(m.check_inv(), "");
}

TEST(EngineModelTest, IllegalBatchesAreRejected) {
  EngineModel m(2, 4, &constant_hash, &first_token_sampler);
  ASSERT_EQ(m.step_arrive(1, {1, 2, 3}, 0), "");
  ASSERT_EQ(m.step_allocate(1, 0), "");
  std::vector<Row> skip = rows(m, 1, 0, 2);
  skip.erase(skip.begin());  // position 1 without position 0
  EXPECT_NE(m.step_forward(skip, nullptr).find("next uncomputed position"), std::string::npos);
  std::vector<Row> past = rows(m, 1, 0, 3);  // position 2 is past the one-block table
  EXPECT_NE(m.step_forward(past, nullptr).find("past the block table"), std::string::npos);
  std::vector<Row> wrong = rows(m, 1, 0, 1);
  wrong[0].r_tok = 7;
  EXPECT_NE(m.step_forward(wrong, nullptr).find("wrong token"), std::string::npos);
  EXPECT_EQ(m.state().requests.at(1).num_computed, 0);
}

}  // namespace
}  // namespace vosti::model
