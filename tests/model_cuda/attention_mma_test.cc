// Tests of the tensor-core paged attention (kernels/cuda/attention/attention.h, family 1) on the GPU:
// - bitwise: every query's output is the same bits as the query computed alone (one decode
//   row in its step), whatever the step: whole prompts, chunks of 1, 7, 64 and 512, decode
//   batches of 1..256 sequences in shuffled row order, prefill and decode rows mixed, another
//   physical page layout, split states folded in one CTA (a folding CTA's, or the decode
//   kernel's) or saved for the merge kernel, and a graph's persistent grid;
// - a planted violation (the split follows the batch) is caught by the same comparison;
// - accuracy: against a float64 reference on the same bf16 cache, and against the per-query
//   family (the engine's previous attention) within the bf16 policy;
// - all of it also under sliding windows (cases with a window: a query at p reads
//   p - window + 1..p, its first tile and split cut inside a tile).
// GPU only (skips with "no CUDA device"); the plan's rules are tested on the CPU
// (tests/kernels_cuda/attention_plan_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_plan.h"
#include "tests/model_cuda/device_attention_plan.h"
#include "tests/kernels_cuda/cuda_test_util.h"

namespace vosti {
namespace {

using cuda_test::DeviceBuffer;

struct MmaCase {
  int head_dim;
  int num_heads;
  int num_kv_heads;
  int split;
  int window = 0;  // sliding window (0: none)
};

constexpr int kBlockSize = 16;

// A value in [-1, 1) that is a pure function of (seed, a, b, c, d): splitmix64 of the tuple.
uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
float hashed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  const uint64_t x = mix64(mix64(mix64(mix64(seed ^ a) ^ b) ^ c) ^ d);
  return static_cast<float>(static_cast<double>(x >> 40) / static_cast<double>(1ull << 23) - 1.0);
}

// A pool of sequences whose K/V (bf16) and queries (f32) are pure functions of the logical
// (sequence, position, head, d), laid out physically by a block permutation.
class Pool {
 public:
  Pool(const MmaCase& c, std::vector<int> lengths, uint64_t seed) : c_(c), lengths_(std::move(lengths)), seed_(seed) {
    for (int len : lengths_) {
      first_block_.push_back(num_blocks_);
      num_blocks_ += (len + kBlockSize - 1) / kBlockSize;
      stride_ = std::max(stride_, (len + kBlockSize - 1) / kBlockSize);
    }
  }
  int num_seqs() const { return static_cast<int>(lengths_.size()); }
  int length(int s) const { return lengths_[static_cast<size_t>(s)]; }
  int row_floats() const { return c_.num_heads * c_.head_dim; }
  // q of (s, p): [heads, hd] f32, scaled so that scores spread over a few units.
  std::vector<float> q(int s, int p) const {
    std::vector<float> out(static_cast<size_t>(row_floats()));
    for (int i = 0; i < row_floats(); ++i) out[static_cast<size_t>(i)] = 2.0f * hashed(seed_, 1, s, p, i + 4096);
    return out;
  }
  float k(int s, int p, int h, int d) const { return bf16_to_f32(k_bits(s, p, h, d)); }
  float v(int s, int p, int h, int d) const { return bf16_to_f32(v_bits(s, p, h, d)); }

  // The device pool [blocks, kv heads, block_size, hd] with sequence s's logical block b at
  // physical block perm[first_block(s) + b], and the block-table matrix [seqs, stride].
  struct Device {
    std::unique_ptr<DeviceBuffer<uint16_t>> k, v;
    std::unique_ptr<DeviceBuffer<int32_t>> tables, stride;
    CudaKvLayer layer;
  };
  Device upload(uint64_t layout_seed) const {
    std::vector<int32_t> perm(static_cast<size_t>(num_blocks_));
    std::iota(perm.begin(), perm.end(), 0);
    std::mt19937 rng(static_cast<uint32_t>(layout_seed));
    std::shuffle(perm.begin(), perm.end(), rng);
    const int hd = c_.head_dim, nkv = c_.num_kv_heads;
    const size_t elems = static_cast<size_t>(num_blocks_) * kBlockSize * nkv * hd;
    // Slots no sequence wrote hold NaN (a pool's unwritten slots may hold anything): a position
    // past a query's own that reached its scores or its P.V would show.
    constexpr uint16_t kNaN = 0x7FC0;
    std::vector<uint16_t> kp(elems, kNaN), vp(elems, kNaN);
    std::vector<int32_t> tables(static_cast<size_t>(num_seqs()) * stride_, -1);
    for (int s = 0; s < num_seqs(); ++s)
      for (int p = 0; p < length(s); ++p) {
        const int64_t phys = perm[static_cast<size_t>(first_block_[static_cast<size_t>(s)] + p / kBlockSize)];
        tables[static_cast<size_t>(s) * stride_ + p / kBlockSize] = static_cast<int32_t>(phys);
        for (int h = 0; h < nkv; ++h) {
          const size_t dst = ((static_cast<size_t>(phys) * nkv + h) * kBlockSize + p % kBlockSize) * hd;
          for (int d = 0; d < hd; ++d) {
            kp[dst + d] = k_bits(s, p, h, d);
            vp[dst + d] = v_bits(s, p, h, d);
          }
        }
      }
    Device dv;
    dv.k = std::make_unique<DeviceBuffer<uint16_t>>(kp);
    dv.v = std::make_unique<DeviceBuffer<uint16_t>>(vp);
    dv.tables = std::make_unique<DeviceBuffer<int32_t>>(tables);
    dv.stride = std::make_unique<DeviceBuffer<int32_t>>(std::vector<int32_t>{stride_});
    dv.layer = CudaKvLayer{dv.k->get(), dv.v->get(), DType::kBF16, num_blocks_, kBlockSize, nkv, hd};
    return dv;
  }

 private:
  uint16_t k_bits(int s, int p, int h, int d) const { return f32_to_bf16(hashed(seed_, 2, s, p * 64 + h, d)); }
  uint16_t v_bits(int s, int p, int h, int d) const { return f32_to_bf16(hashed(seed_, 3, s, p * 64 + h, d)); }

  MmaCase c_;
  std::vector<int> lengths_;
  uint64_t seed_;
  std::vector<int> first_block_;
  int stride_ = 0, num_blocks_ = 0;
};

struct Query {
  int seq;
  int pos;
};

// How a step is run: partial slots (0: every split folded in one CTA; -1: the stepper's
// capacity), the per-split launch's CTA rows (0: one per item, else a persistent grid as a
// decode graph runs it), the split.
struct RunOptions {
  int32_t partial_capacity = -1;
  int32_t per_split_ctas = 0;
  int split_override = 0;             // 0: the case's split
  int folded_rows = kAttnRowsPerCta;  // rows of a folding CTA (two m16 blocks per warp at 128)
  int decode_fold_ctas = 0;           // AttentionShape::decode_fold_ctas (1: every step's decodes fold)
  DType out_dtype = DType::kF32;
};

// Runs steps of up to kMaxRows rows over one pool, with its buffers allocated once.
class Stepper {
 public:
  static constexpr int kMaxRows = 8192;
  Stepper(const MmaCase& c, const Pool& pool, int32_t partial_capacity)
      : c_(c),
        pool_(pool),
        capacity_(partial_capacity),
        q_(static_cast<size_t>(kMaxRows) * pool.row_floats()),
        out_(static_cast<size_t>(kMaxRows) * pool.row_floats()),
        out16_(static_cast<size_t>(kMaxRows) * pool.row_floats()),
        pos_(kMaxRows),
        seq_(kMaxRows),
        work_(kMaxRows, partial_capacity, c.num_heads, c.head_dim) {}

  const AttentionPlan& plan() const { return plan_; }

  // Runs one step whose rows are `rows` (consecutive positions of a sequence adjacent); returns
  // [rows, heads * hd] f32 outputs (bf16 outputs widened).
  std::vector<float> run(const Pool::Device& dev, const std::vector<Query>& rows, const RunOptions& opt) {
    const int m = static_cast<int>(rows.size());
    EXPECT_LE(m, kMaxRows);
    const int width = pool_.row_floats();
    std::vector<float> q(static_cast<size_t>(m) * width);
    std::vector<int32_t> pos(static_cast<size_t>(m)), seq(static_cast<size_t>(m));
    for (int r = 0; r < m; ++r) {
      const std::vector<float> qr = pool_.q(rows[r].seq, rows[r].pos);
      std::copy(qr.begin(), qr.end(), q.begin() + static_cast<int64_t>(r) * width);
      pos[static_cast<size_t>(r)] = rows[r].pos;
      seq[static_cast<size_t>(r)] = rows[r].seq;
    }
    q_.upload(q);
    pos_.upload(pos);
    seq_.upload(seq);
    AttentionShape shape{c_.num_heads,    c_.num_kv_heads,
                         c_.head_dim,     opt.split_override > 0 ? opt.split_override : c_.split,
                         opt.folded_rows, c_.window};
    shape.decode_fold_ctas = opt.decode_fold_ctas;
    const int32_t capacity = opt.partial_capacity < 0 ? capacity_ : opt.partial_capacity;
    const Status planned = plan_attention(pos, seq, shape, capacity, &plan_);
    EXPECT_TRUE(planned.ok()) << planned.to_string();
    auto view = work_.upload(plan_);
    EXPECT_TRUE(view.ok()) << view.status().to_string();
    AttentionWorkView w = view.value();
    if (opt.per_split_ctas > 0) {
      EXPECT_TRUE(plan_.folded.empty()) << "a graph's view runs per-split items only";
      w = work_.graph_view(shape.split, c_.window, m, opt.per_split_ctas);
    }
    AttentionArgs a;
    a.q = q_.get();
    a.q_row_stride = width;
    a.num_heads = c_.num_heads;
    a.positions = pos_.get();
    a.row_seq = seq_.get();
    a.block_tables = dev.tables->get();
    a.block_table_stride = dev.stride->get();
    a.scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    a.window = c_.window;
    a.out = opt.out_dtype == DType::kF32 ? static_cast<void*>(out_.get()) : static_cast<void*>(out16_.get());
    a.out_row_stride = width;
    a.out_dtype = opt.out_dtype;
    a.m = m;
    a.work = w;
    a.kernels = cuda_test::attention_kernels(c_.head_dim);
    out_.poison();
    const Status st = attention_tensor_cores(a, dev.layer, nullptr);
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const size_t n = static_cast<size_t>(m) * width;
    if (opt.out_dtype == DType::kF32) return out_.download(0, n);
    std::vector<float> widened;
    for (uint16_t b : out16_.download(0, n)) widened.push_back(bf16_to_f32(b));
    return widened;
  }

 private:
  MmaCase c_;
  const Pool& pool_;
  int32_t capacity_;
  DeviceBuffer<float> q_, out_;
  DeviceBuffer<uint16_t> out16_;
  DeviceBuffer<int32_t> pos_, seq_;
  AttentionPlan plan_;
  cuda_test::DeviceAttentionPlan work_;
};

class AttentionMma : public ::testing::TestWithParam<MmaCase> {};

std::string mma_name(const ::testing::TestParamInfo<MmaCase>& info) {
  const MmaCase& c = info.param;
  return "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.num_heads) + "_kv" +
         std::to_string(c.num_kv_heads) + "_split" + std::to_string(c.split) +
         (c.window > 0 ? "_window" + std::to_string(c.window) : "");
}

TEST_P(AttentionMma, EveryQueryHasTheBitsItHasAlone) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const MmaCase c = GetParam();
  // Five long sequences (every position queried) and 251 decode sequences (last position).
  std::vector<int> lengths = {1, 37, 100, 700, 1300};
  std::mt19937 rng(7);
  for (int i = 0; i < 251; ++i) lengths.push_back(1 + static_cast<int>(rng() % 1600));
  const Pool pool(c, lengths, 11);
  const Pool::Device dev = pool.upload(1);
  const int width = pool.row_floats();
  const RunOptions plain;
  Stepper stepper(c, pool, 251 * attention_num_splits(1600, c.split) + 64);
  const auto run_step = [&](const Pool::Device& d, const std::vector<Query>& rows, const RunOptions& opt) {
    return stepper.run(d, rows, opt);
  };

  // The reference: each query alone.
  std::vector<std::vector<float>> alone(static_cast<size_t>(pool.num_seqs()));
  for (int s = 0; s < pool.num_seqs(); ++s) {
    const int first = s < 5 ? 0 : pool.length(s) - 1;
    for (int p = first; p < pool.length(s); ++p) {
      const std::vector<float> out = run_step(dev, {{s, p}}, plain);
      alone[static_cast<size_t>(s)].insert(alone[static_cast<size_t>(s)].end(), out.begin(), out.end());
    }
  }
  const auto expect_alone = [&](const std::vector<float>& out, const std::vector<Query>& rows,
                                const std::string& what) {
    // Every row is compared; a failure names the first differing row, its first differing value
    // (head, d) both ways, and how many rows and values of the step differ.
    size_t bad_rows = 0, bad_values = 0;
    std::string first_bad;
    for (size_t r = 0; r < rows.size(); ++r) {
      const int s = rows[r].seq, p = rows[r].pos;
      const int first = s < 5 ? 0 : pool.length(s) - 1;
      const float* ref = alone[static_cast<size_t>(s)].data() + static_cast<int64_t>(p - first) * width;
      const float* got = out.data() + r * width;
      if (cuda_test::same_bits(ref, got, static_cast<size_t>(width) * 4)) continue;
      ++bad_rows;
      for (int i = 0; i < width; ++i) {
        if (cuda_test::same_bits(ref + i, got + i, 4)) continue;
        if (bad_values++ == 0)
          first_bad = "sequence " + std::to_string(s) + " position " + std::to_string(p) + " (row " +
                      std::to_string(r) + "), head " + std::to_string(i / c.head_dim) + " d " +
                      std::to_string(i % c.head_dim) + ": alone " + std::to_string(ref[i]) + ", in the step " +
                      std::to_string(got[i]);
      }
    }
    ASSERT_EQ(bad_rows, 0u) << what << ": " << bad_rows << " of " << rows.size() << " rows (" << bad_values
                            << " values) differ from the query alone; the first: " << first_bad;
  };

  // Whole prompts and chunked prompts; the long sequences share each step.
  for (int chunk : {1, 7, 64, 512, 1 << 20}) {
    for (int begin = 0; begin < 1300; begin += chunk) {
      std::vector<Query> rows;
      for (int s = 0; s < 5; ++s)
        for (int p = begin; p < std::min(pool.length(s), begin + chunk); ++p) rows.push_back({s, p});
      if (rows.empty()) continue;
      expect_alone(run_step(dev, rows, plain), rows, "chunk " + std::to_string(chunk));
      if (c.head_dim <= 128 && chunk >= 64) {  // two m16 blocks per warp: the same bits
        RunOptions wide = plain;
        wide.folded_rows = 2 * kAttnRowsPerCta;
        expect_alone(run_step(dev, rows, wide), rows, "chunk " + std::to_string(chunk) + ", 128-row CTAs");
      }
    }
  }
  // Decode batches of 1..256 sequences in shuffled row order, alone and beside a prefill chunk.
  std::vector<int> decode_seqs(251);
  std::iota(decode_seqs.begin(), decode_seqs.end(), 5);
  for (int batch : {1, 2, 7, 64, 251}) {
    std::shuffle(decode_seqs.begin(), decode_seqs.end(), rng);
    std::vector<Query> rows;
    for (int i = 0; i < batch; ++i) rows.push_back({decode_seqs[static_cast<size_t>(i)], 0});
    for (Query& q : rows) q.pos = pool.length(q.seq) - 1;
    expect_alone(run_step(dev, rows, plain), rows, "decode batch " + std::to_string(batch));
    RunOptions graph = plain;
    graph.per_split_ctas = 3;  // a persistent grid striding over the items
    expect_alone(run_step(dev, rows, graph), rows, "decode batch in a graph's grid");
    RunOptions folded = plain;
    folded.partial_capacity = 0;  // every split folded in one CTA
    expect_alone(run_step(dev, rows, folded), rows, "decode batch, splits folded");
    if (attention_decode_fits(c.head_dim, c.num_heads / c.num_kv_heads, kBlockSize)) {
      RunOptions in_decode = plain;
      in_decode.decode_fold_ctas = 1;  // each decode row's splits folded by the decode kernel
      expect_alone(run_step(dev, rows, in_decode), rows, "decode batch, splits folded by the decode kernel");
      const bool several = std::any_of(rows.begin(), rows.end(), [&](const Query& q) {
        return attention_num_splits(q.pos, c.split) > attention_window_first(q.pos, c.window) / c.split + 1;
      });
      EXPECT_EQ(stepper.plan().decode_folds, several) << "decode batch " << batch;
      in_decode.per_split_ctas = 3;
      expect_alone(run_step(dev, rows, in_decode), rows, "decode batch folded by the decode kernel in a graph's grid");
    }
    std::vector<Query> mixed = rows;
    for (int p = 600; p < 700; ++p) mixed.push_back({3, p});
    expect_alone(run_step(dev, mixed, plain), mixed, "decode batch beside a prefill chunk");
  }
  // Another physical layout of the same logical cache.
  const Pool::Device moved = pool.upload(2);
  std::vector<Query> rows;
  for (int p = 0; p < 1300; ++p) rows.push_back({4, p});
  for (int s = 5; s < 40; ++s) rows.push_back({s, pool.length(s) - 1});
  expect_alone(run_step(moved, rows, plain), rows, "shuffled pages");
  // The bf16 output is the f32 output rounded once.
  RunOptions bf16 = plain;
  bf16.out_dtype = DType::kBF16;
  const std::vector<float> o32 = run_step(dev, rows, plain), o16 = run_step(dev, rows, bf16);
  for (size_t i = 0; i < o32.size(); ++i)
    ASSERT_EQ(f32_to_bf16(o16[i]), f32_to_bf16(o32[i])) << "bf16 output element " << i;
}

// The planted violation: a split that follows the batch changes bits the comparison sees.
TEST_P(AttentionMma, ASplitThatFollowsTheBatchIsCaught) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const MmaCase c = GetParam();
  const Pool pool(c, {1300, 900, 5}, 3);
  const Pool::Device dev = pool.upload(1);
  Stepper stepper(c, pool, 256);
  const auto run_step = [&](const Pool::Device& d, const std::vector<Query>& rows, const RunOptions& opt) {
    return stepper.run(d, rows, opt);
  };
  const std::vector<Query> rows = {{0, 1299}, {1, 899}, {2, 4}};
  const std::vector<float> deployment = run_step(dev, {rows[0]}, RunOptions{});
  RunOptions planted;
  planted.split_override = c.split == 128 ? 256 : 128;  // what a batch-dependent rule would pick
  const std::vector<float> batch = run_step(dev, rows, planted);
  EXPECT_FALSE(cuda_test::same_bits(deployment.data(), batch.data(), deployment.size() * 4))
      << "a different split gave the same bits: the bitwise checks could not see a batch-dependent split";
}

// float64 reference on the same bf16 cache, full-precision q.
double worst_error_vs_f64(const MmaCase& c, const Pool& pool, const std::vector<Query>& rows,
                          const std::vector<float>& out) {
  const int hd = c.head_dim, group = c.num_heads / c.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  double worst = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int h = 0; h < c.num_heads; ++h) {
      const std::vector<float> qr = pool.q(rows[r].seq, rows[r].pos);
      const float* qh = qr.data() + static_cast<int64_t>(h) * hd;
      const int kvh = h / group;
      const int first = attention_window_first(rows[r].pos, c.window);
      std::vector<double> s(static_cast<size_t>(rows[r].pos) + 1, -INFINITY);
      double mx = -INFINITY;
      for (int j = first; j <= rows[r].pos; ++j) {
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(qh[d]) * pool.k(rows[r].seq, j, kvh, d);
        s[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      std::vector<double> ref(static_cast<size_t>(hd), 0.0), got(static_cast<size_t>(hd));
      for (int j = first; j <= rows[r].pos; ++j)
        for (int d = 0; d < hd; ++d)
          ref[static_cast<size_t>(d)] += s[static_cast<size_t>(j)] / sum * pool.v(rows[r].seq, j, kvh, d);
      for (int d = 0; d < hd; ++d)
        got[static_cast<size_t>(d)] = out[r * pool.row_floats() + static_cast<size_t>(h) * hd + d];
      worst = std::max(worst, cuda_test::relative_error(ref, got));
    }
  }
  return worst;
}

// Bound: q and the softmax weights are rounded to bf16 (relative 2^-9 each) before the tensor
// cores, the exponentials are ex2.approx (2 ulp): per row ~2e-3 relative against float64 for
// these random inputs; 1e-2 leaves room, and an indexing or masking error gives > 1e-1.
constexpr double kF64Bound = 1e-2;

TEST_P(AttentionMma, MatchesFloat64AndThePerQueryFamily) {
  VOSTI_SKIP_WITHOUT_CUDA();
  const MmaCase c = GetParam();
  const Pool pool(c, {1, 37, 100, 700, 1300}, 5);
  const Pool::Device dev = pool.upload(4);
  Stepper stepper(c, pool, 256);
  const auto run_step = [&](const Pool::Device& d, const std::vector<Query>& rows, const RunOptions& opt) {
    return stepper.run(d, rows, opt);
  };
  std::vector<Query> rows;
  for (int s = 0; s < 5; ++s)
    for (int p = 0; p < pool.length(s); p += (s >= 3 ? 11 : 1)) rows.push_back({s, p});
  const std::vector<float> out = run_step(dev, rows, RunOptions{});
  const double worst = worst_error_vs_f64(c, pool, rows, out);
  EXPECT_LT(worst, kF64Bound);

  // The per-query family on the same rows.
  const int width = pool.row_floats();
  std::vector<float> q(rows.size() * static_cast<size_t>(width));
  std::vector<int32_t> pos, seq;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<float> qr = pool.q(rows[r].seq, rows[r].pos);
    std::copy(qr.begin(), qr.end(), q.begin() + static_cast<int64_t>(r) * width);
    pos.push_back(rows[r].pos);
    seq.push_back(rows[r].seq);
  }
  DeviceBuffer<float> q_dev(q), per_query(q.size());
  DeviceBuffer<int32_t> pos_dev(pos), seq_dev(seq);
  AttentionArgs a;
  a.q = q_dev.get();
  a.q_row_stride = width;
  a.num_heads = c.num_heads;
  a.positions = pos_dev.get();
  a.row_seq = seq_dev.get();
  a.block_tables = dev.tables->get();
  a.block_table_stride = dev.stride->get();
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  a.window = c.window;
  a.out = per_query.get();
  a.out_row_stride = width;
  a.m = static_cast<int64_t>(rows.size());
  a.kernels = cuda_test::attention_kernels(c.head_dim);
  ASSERT_TRUE(attention_per_query(a, dev.layer, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> old = per_query.download();
  double worst_old = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<double> e(old.begin() + static_cast<int64_t>(r) * width,
                          old.begin() + static_cast<int64_t>(r + 1) * width);
    std::vector<double> o(out.begin() + static_cast<int64_t>(r) * width,
                          out.begin() + static_cast<int64_t>(r + 1) * width);
    worst_old = std::max(worst_old, cuda_test::relative_error(e, o));
  }
  EXPECT_LT(worst_old, kF64Bound);
  std::printf("[ attention mma ] %s: worst relative error vs float64 %.3g, vs the per-query family %.3g (%zu rows)\n",
              mma_name(::testing::TestParamInfo<MmaCase>(c, 0)).c_str(), worst, worst_old, rows.size());
}

// {256, 8, 2, 64}: up to 25 splits a row, more than the merge kernel stages at once for head_dim
// 256 (16): its second stage, loaded while the first is folded.
INSTANTIATE_TEST_SUITE_P(Shapes, AttentionMma,
                         ::testing::Values(MmaCase{128, 32, 8, 512}, MmaCase{128, 8, 2, 128}, MmaCase{64, 9, 3, 512},
                                           MmaCase{64, 14, 2, 256}, MmaCase{16, 4, 2, 512}, MmaCase{32, 4, 2, 64},
                                           MmaCase{256, 8, 2, 512}, MmaCase{128, 8, 8, 512},
                                           MmaCase{128, 32, 8, 512, 200}, MmaCase{64, 14, 2, 128, 333},
                                           MmaCase{256, 8, 2, 64}),
                         mma_name);

TEST(AttentionMmaErrors, BadPlansAndShapesAreNamed) {
  VOSTI_SKIP_WITHOUT_CUDA();
  DeviceBuffer<uint16_t> cache(4096);
  DeviceBuffer<float> buf(4096);
  DeviceBuffer<int32_t> ints(64);
  CudaKvLayer kv{cache.get(), cache.get(), DType::kBF16, 4, 4, 2, 64};
  AttentionArgs a;
  a.q = buf.get();
  a.q_row_stride = 256;
  a.num_heads = 4;
  a.positions = ints.get();
  a.row_seq = ints.get();
  a.block_tables = ints.get();
  a.block_table_stride = ints.get();
  a.out = buf.get();
  a.out_row_stride = 256;
  a.m = 1;
  a.kernels = cuda_test::attention_kernels(64);
  EXPECT_TRUE(attention_tensor_cores(a, kv, nullptr).ok()) << "an empty plan launches nothing";
  AttentionArgs bad = a;
  bad.work.per_split_grid = 1;  // items without their arrays
  Status s = attention_tensor_cores(bad, kv, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("plan"), std::string::npos) << s.to_string();
  bad = a;
  bad.work.split = 100;
  s = attention_tensor_cores(bad, kv, nullptr);
  EXPECT_NE(s.message().find("split 100"), std::string::npos) << s.to_string();
  CudaKvLayer f32 = kv;
  f32.dtype = DType::kF32;
  EXPECT_EQ(attention_tensor_cores(a, f32, nullptr).code(), StatusCode::kInvalidArgument);
  CudaKvLayer odd = kv;
  odd.head_dim = 80;
  EXPECT_EQ(attention_tensor_cores(a, odd, nullptr).code(), StatusCode::kUnimplemented);
  CudaKvLayer huge = kv;
  huge.block_size = 1 << 24;  // 2 heads x 2^24 positions x 64: 2^31 elements a block
  s = attention_tensor_cores(a, huge, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("2^31"), std::string::npos) << s.to_string();
  EXPECT_FALSE(tensor_core_attention(odd, 4));
  EXPECT_FALSE(tensor_core_attention(f32, 4));
  EXPECT_TRUE(tensor_core_attention(kv, 4));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace vosti
