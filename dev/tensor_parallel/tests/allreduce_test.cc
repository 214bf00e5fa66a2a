// GPU tests of the tensor-parallel collectives (kernels/cuda/collective/allreduce.h) against the
// host's rank-order sum (tests/kernels/rank_order_sum_reference.h), bit for bit:
//   - the local kernels on one GPU: rank_order_sum over many sizes, rank counts and alignments,
//     interleave_columns;
//   - the NCCL collectives on every group size from 2 to the machine's GPUs (one thread per rank,
//     as the runner drives them): messages of [T, hidden] rows in many batch compositions, each
//     request's row the same bits in every composition, on every rank, equal to the host's sum;
//   - the planted variant (NCCL's own all-reduce) differing from the rank order at some size from
//     three ranks on (with two, a + b == b + a).
// Skips: "no CUDA device" without a GPU, "needs N GPUs" with fewer. Where two or more GPUs are
// present, libnccl.so.2 must load (the multi-GPU machine is where these tests exist to run).
#include "kernels/cuda/collective/allreduce.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "tests/kernels/rank_order_sum_reference.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
// nccl_library.h declares NCCL's types itself (it is opened at run time): check them.
static_assert(static_cast<int>(ncclSuccess) == vosti::nccl_abi::kSuccess);
static_assert(static_cast<int>(ncclFloat32) == vosti::nccl_abi::kFloat32);
static_assert(static_cast<int>(ncclSum) == vosti::nccl_abi::kSum);
static_assert(sizeof(ncclDataType_t) == sizeof(int) && sizeof(ncclRedOp_t) == sizeof(int));
static_assert(sizeof(ncclResult_t) == sizeof(vosti::nccl_abi::Result));
static_assert(std::is_pointer_v<ncclComm_t> && sizeof(ncclComm_t) == sizeof(vosti::nccl_abi::CommHandle));
#endif

namespace vosti {
namespace {

namespace ref = rank_order_reference;

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

#define VOSTI_SKIP_UNLESS_GPUS(n)                                                                       \
  do {                                                                                                  \
    const int vosti_have = device_count();                                                              \
    if (vosti_have == 0) GTEST_SKIP() << "no CUDA device";                                              \
    if (vosti_have < (n))                                                                               \
      GTEST_SKIP() << "needs " << (n) << " GPUs (tensor parallelism), this machine has " << vosti_have; \
  } while (0)

// An owning device buffer of floats on the current device.
class Floats {
 public:
  explicit Floats(size_t n) : n_(n) {
    EXPECT_EQ(cudaMalloc(&p_, std::max<size_t>(n, 1) * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemset(p_, 0xFF, std::max<size_t>(n, 1) * sizeof(float)), cudaSuccess);  // NaN
  }
  ~Floats() { (void)cudaFree(p_); }
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  float* get() const { return p_; }
  void upload(const std::vector<float>& v, size_t at = 0) {
    EXPECT_EQ(cudaMemcpy(p_ + at, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> download(size_t at, size_t n) const {
    std::vector<float> v(n);
    EXPECT_EQ(cudaMemcpy(v.data(), p_ + at, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }

 private:
  float* p_ = nullptr;
  size_t n_ = 0;
};

TEST(RankOrderSumKernel, MatchesTheHostReferenceBitForBit) {
  VOSTI_SKIP_UNLESS_GPUS(1);
  const std::vector<int64_t> counts = {1,         2,    3,    4,    5,    63,    64,    65,    255,       256,
                                       257,       1000, 4096, 4099, 8192, 12289, 65536, 65539, 8192 * 64, 8192 * 64 + 3,
                                       4096 * 512};
  for (int num_ranks = 1; num_ranks <= 8; ++num_ranks) {
    for (int64_t count : counts) {
      for (int64_t misalign : {0, 1}) {  // 1: the copies start one float past 16-byte alignment
        const int64_t stride = count + misalign * 3;
        std::vector<std::vector<float>> messages;
        for (int r = 0; r < num_ranks; ++r)
          messages.push_back(ref::spread_values(static_cast<size_t>(count), 97u * num_ranks + r + count));
        const std::vector<float> want = ref::sum_messages(messages);
        Floats copies(static_cast<size_t>(num_ranks * stride + misalign)), out(static_cast<size_t>(count + misalign));
        for (int r = 0; r < num_ranks; ++r) copies.upload(messages[static_cast<size_t>(r)], r * stride + misalign);
        ASSERT_TRUE(
            rank_order_sum(copies.get() + misalign, stride, num_ranks, count, out.get() + misalign, nullptr).ok());
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> got = out.download(static_cast<size_t>(misalign), static_cast<size_t>(count));
        ASSERT_TRUE(ref::same_bits(got.data(), want.data(), want.size()))
            << num_ranks << " ranks, count " << count << ", misaligned " << misalign;
      }
    }
  }
}

TEST(RankOrderSumKernel, RejectsBadShapes) {
  VOSTI_SKIP_UNLESS_GPUS(1);
  Floats b(16);
  EXPECT_FALSE(rank_order_sum(b.get(), 4, 0, 4, b.get(), nullptr).ok());
  EXPECT_FALSE(rank_order_sum(b.get(), 4, 2, 5, b.get(), nullptr).ok());
}

TEST(InterleaveColumnsKernel, PutsEachRanksColumnsSideBySide) {
  VOSTI_SKIP_UNLESS_GPUS(1);
  for (int num_ranks : {1, 2, 3, 8}) {
    for (int64_t rows : {1, 5, 64}) {
      const int64_t cols = 40;
      const std::vector<float> gathered = ref::spread_values(static_cast<size_t>(num_ranks * rows * cols), 5);
      Floats in(gathered.size()), out(gathered.size());
      in.upload(gathered);
      ASSERT_TRUE(interleave_columns(in.get(), num_ranks, rows, cols, out.get(), nullptr).ok());
      const std::vector<float> got = out.download(0, gathered.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int s = 0; s < num_ranks; ++s)
          for (int64_t j = 0; j < cols; ++j)
            ASSERT_EQ(got[static_cast<size_t>(r * num_ranks * cols + s * cols + j)],
                      gathered[static_cast<size_t>((s * rows + r) * cols + j)]);
    }
  }
}

// ---- NCCL collectives: one thread per rank, as the runner drives them ----

// A group over devices 0..size-1 with one stream and buffers for messages of up to max_count
// values per rank.
class RankGroup {
 public:
  RankGroup(std::shared_ptr<const NcclLibrary> nccl, int size, int64_t max_count) : size_(size) {
    std::vector<int> devices(static_cast<size_t>(size));
    for (int r = 0; r < size; ++r) devices[static_cast<size_t>(r)] = r;
    auto g = NcclGroup::create(std::move(nccl), devices);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (g.ok()) group_ = std::move(g).value();
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(cudaSetDevice(r), cudaSuccess);
      cudaStream_t s = nullptr;
      EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
      streams_.push_back(s);
      data_.push_back(std::make_unique<Floats>(static_cast<size_t>(max_count)));
      gather_.push_back(std::make_unique<Floats>(static_cast<size_t>(size * max_count)));
      out_.push_back(std::make_unique<Floats>(static_cast<size_t>(size * max_count)));
    }
  }
  ~RankGroup() {
    for (int r = 0; r < size_; ++r) {
      (void)cudaSetDevice(r);
      (void)cudaStreamDestroy(streams_[static_cast<size_t>(r)]);
    }
  }
  bool ok() const { return group_.size() == size_; }

  // Runs fn(rank) on one thread per rank, with the rank's device current.
  void on_ranks(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size_; ++r)
      threads.emplace_back([&fn, r] {
        EXPECT_EQ(cudaSetDevice(r), cudaSuccess);
        fn(r);
      });
    for (std::thread& t : threads) t.join();
  }

  // Every rank's result of all_reduce over its message (messages[rank], all the same length).
  std::vector<std::vector<float>> all_reduce(AllReduceAlgorithm algorithm,
                                             const std::vector<std::vector<float>>& messages) {
    std::vector<std::vector<float>> got(static_cast<size_t>(size_));
    const int64_t count = static_cast<int64_t>(messages[0].size());
    on_ranks([&](int r) {
      const auto i = static_cast<size_t>(r);
      data_[i]->upload(messages[i]);
      const Status s =
          vosti::all_reduce(group_.rank(r), algorithm, data_[i]->get(), count, gather_[i]->get(), streams_[i]);
      EXPECT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(cudaStreamSynchronize(streams_[i]), cudaSuccess);
      got[i] = data_[i]->download(0, static_cast<size_t>(count));
    });
    return got;
  }

  std::vector<std::vector<float>> all_gather_columns(const std::vector<std::vector<float>>& shards, int64_t rows) {
    std::vector<std::vector<float>> got(static_cast<size_t>(size_));
    const int64_t cols = static_cast<int64_t>(shards[0].size()) / rows;
    on_ranks([&](int r) {
      const auto i = static_cast<size_t>(r);
      data_[i]->upload(shards[i]);
      const Status s = vosti::all_gather_columns(group_.rank(r), data_[i]->get(), rows, cols, gather_[i]->get(),
                                                 out_[i]->get(), streams_[i]);
      EXPECT_TRUE(s.ok()) << s.to_string();
      EXPECT_EQ(cudaStreamSynchronize(streams_[i]), cudaSuccess);
      got[i] = out_[i]->download(0, static_cast<size_t>(size_ * rows * cols));
    });
    return got;
  }

 private:
  int size_;
  NcclGroup group_;
  std::vector<cudaStream_t> streams_;
  std::vector<std::unique_ptr<Floats>> data_, gather_, out_;
};

std::shared_ptr<const NcclLibrary> load_nccl_or_fail() {
  auto nccl = NcclLibrary::load();
  EXPECT_TRUE(nccl.ok()) << nccl.status().to_string();
  return nccl.ok() ? *nccl : nullptr;
}

// A pool of requests whose rows (one per rank: the rank's partial sums) the compositions draw
// from, and each request's rank-order sum.
struct RowPool {
  RowPool(int num_ranks, int64_t hidden, int num_requests) : hidden(hidden) {
    for (int q = 0; q < num_requests; ++q) {
      std::vector<std::vector<float>> by_rank;
      for (int r = 0; r < num_ranks; ++r)
        by_rank.push_back(ref::spread_values(static_cast<size_t>(hidden), 1000003u * q + r));
      want.push_back(ref::sum_messages(by_rank));
      rows.push_back(std::move(by_rank));
    }
  }
  // The ranks' messages [T, hidden] of a composition (request of each row).
  std::vector<std::vector<float>> messages(const std::vector<int>& composition) const {
    std::vector<std::vector<float>> m(rows[0].size());
    for (size_t r = 0; r < m.size(); ++r)
      for (int q : composition)
        m[r].insert(m[r].end(), rows[static_cast<size_t>(q)][r].begin(), rows[static_cast<size_t>(q)][r].end());
    return m;
  }
  int64_t hidden;
  std::vector<std::vector<std::vector<float>>> rows;  // [request][rank][hidden]
  std::vector<std::vector<float>> want;               // [request][hidden]
};

// Batch compositions: T rows drawn from the pool, T from 1 to 512 (decode and prefill sizes).
std::vector<std::vector<int>> compositions(int num_requests) {
  std::mt19937 rng(11);
  std::vector<std::vector<int>> out;
  for (int t : {1, 2, 3, 5, 8, 13, 32, 64, 100, 256, 512}) {
    std::vector<int> c(static_cast<size_t>(t));
    for (int& q : c) q = static_cast<int>(rng() % static_cast<unsigned>(num_requests));
    out.push_back(c);
  }
  return out;
}

TEST(NcclAllReduce, EveryRankGetsTheRankOrderSumInEveryBatchComposition) {
  VOSTI_SKIP_UNLESS_GPUS(2);
  auto nccl = load_nccl_or_fail();
  ASSERT_TRUE(nccl);
  for (int size = 2; size <= std::min(device_count(), 8); ++size) {
    for (int64_t hidden : {int64_t{4096}, int64_t{8192}}) {
      RowPool pool(size, hidden, 24);
      RankGroup group(nccl, size, 512 * hidden);
      ASSERT_TRUE(group.ok());
      for (const std::vector<int>& c : compositions(24)) {
        const auto got = group.all_reduce(AllReduceAlgorithm::kGatherRankOrder, pool.messages(c));
        for (int r = 0; r < size; ++r)
          for (size_t row = 0; row < c.size(); ++row)
            ASSERT_TRUE(ref::same_bits(got[static_cast<size_t>(r)].data() + row * static_cast<size_t>(hidden),
                                       pool.want[static_cast<size_t>(c[row])].data(), static_cast<size_t>(hidden)))
                << size << " ranks, hidden " << hidden << ", " << c.size() << " rows: rank " << r << ", row " << row
                << " (request " << c[row] << ")";
      }
    }
  }
}

TEST(NcclAllReduce, OddMessageSizesGiveTheRankOrderSum) {
  VOSTI_SKIP_UNLESS_GPUS(2);
  auto nccl = load_nccl_or_fail();
  ASSERT_TRUE(nccl);
  const int size = std::min(device_count(), 8);
  RankGroup group(nccl, size, 1 << 24);
  ASSERT_TRUE(group.ok());
  for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{1023}, int64_t{65537}, int64_t{1} << 20, int64_t{1} << 24}) {
    std::vector<std::vector<float>> messages;
    for (int r = 0; r < size; ++r) messages.push_back(ref::spread_values(static_cast<size_t>(count), 3u * count + r));
    const std::vector<float> want = ref::sum_messages(messages);
    const auto got = group.all_reduce(AllReduceAlgorithm::kGatherRankOrder, messages);
    for (int r = 0; r < size; ++r)
      ASSERT_TRUE(ref::same_bits(got[static_cast<size_t>(r)].data(), want.data(), want.size()))
          << size << " ranks, count " << count << ", rank " << r;
  }
}

TEST(NcclAllReduce, ThePlantedNcclSumDiffersAtSomeSize) {
  VOSTI_SKIP_UNLESS_GPUS(3);  // two ranks: a + b == b + a, every order gives the same bits
  auto nccl = load_nccl_or_fail();
  ASSERT_TRUE(nccl);
  const int size = std::min(device_count(), 8);
  const int64_t hidden = 8192;
  RowPool pool(size, hidden, 24);
  RankGroup group(nccl, size, 512 * hidden);
  ASSERT_TRUE(group.ok());
  int64_t rows_differ = 0, rows = 0;
  std::string first;
  for (const std::vector<int>& c : compositions(24)) {
    const auto got = group.all_reduce(AllReduceAlgorithm::kNcclSum, pool.messages(c));
    for (size_t row = 0; row < c.size(); ++row, ++rows) {
      const bool same = ref::same_bits(got[0].data() + row * static_cast<size_t>(hidden),
                                       pool.want[static_cast<size_t>(c[row])].data(), static_cast<size_t>(hidden));
      if (!same && first.empty())
        first = std::to_string(c.size()) + " rows, row " + std::to_string(row) + " (request " + std::to_string(c[row]) +
                ")";
      rows_differ += !same;
    }
  }
  std::printf("planted ncclAllReduce, %d ranks: %lld of %lld rows differ from the rank-order sum; first: %s\n", size,
              static_cast<long long>(rows_differ), static_cast<long long>(rows), first.c_str());
  EXPECT_GT(rows_differ, 0) << "NCCL's own all-reduce summed in rank order at every size: the planted variant "
                               "would not make the harness fail";
}

TEST(NcclAllGatherColumns, GathersTheVocabularyShards) {
  VOSTI_SKIP_UNLESS_GPUS(2);
  auto nccl = load_nccl_or_fail();
  ASSERT_TRUE(nccl);
  const int size = std::min(device_count(), 8);
  const int64_t rows = 37, cols = 4008;
  RankGroup group(nccl, size, size * rows * cols);
  ASSERT_TRUE(group.ok());
  std::vector<std::vector<float>> shards;
  for (int r = 0; r < size; ++r) shards.push_back(ref::spread_values(static_cast<size_t>(rows * cols), 400u + r));
  const auto got = group.all_gather_columns(shards, rows);
  for (int q = 0; q < size; ++q)
    for (int64_t r = 0; r < rows; ++r)
      for (int s = 0; s < size; ++s)
        ASSERT_TRUE(ref::same_bits(&got[static_cast<size_t>(q)][static_cast<size_t>((r * size + s) * cols)],
                                   &shards[static_cast<size_t>(s)][static_cast<size_t>(r * cols)],
                                   static_cast<size_t>(cols)))
            << "rank " << q << ", row " << r << ", shard " << s;
}

TEST(NcclGroupOfOne, LoadsAndLeavesTheMessageAsItIs) {
  VOSTI_SKIP_UNLESS_GPUS(1);
  auto nccl = NcclLibrary::load();
  if (!nccl.ok() && device_count() < 2) GTEST_SKIP() << nccl.status().to_string();
  ASSERT_TRUE(nccl.ok()) << nccl.status().to_string();
  EXPECT_GE((*nccl)->version(), 20900);
  RankGroup group(*nccl, 1, 1024);
  ASSERT_TRUE(group.ok());
  const std::vector<float> m = ref::spread_values(1000, 9);
  const auto got = group.all_reduce(AllReduceAlgorithm::kGatherRankOrder, {m});
  EXPECT_TRUE(ref::same_bits(got[0].data(), m.data(), m.size()));
}

}  // namespace
}  // namespace vosti
