// LogitsDigest: the 128-bit fingerprint of one output position's logits row, by which two
// runs (or two servers) are compared bit for bit without shipping the rows: XXH3-128 of the
// row's raw little-endian f32 bytes, {low64, high64}, by sample/xxh3.h's long path (rows of
// 61 floats or more; libxxhash below that), the source the CUDA runner's device digest
// (kernels/cuda/sampler/digest_kernels.h) compiles too. tests/sample checks it against libxxhash.
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace vosti {

using LogitsDigest = std::array<uint64_t, 2>;  // {low64, high64} of XXH3-128

// XXH3-128 (seed 0, default secret) of logits.size_bytes() bytes.
LogitsDigest logits_digest(std::span<const float> logits);

// XXH128's canonical hex of a digest {low64, high64}: 32 lower-case digits, high 64 bits first,
// equal to Python's xxhash.xxh3_128_hexdigest(bytes).
std::string digest_hex(const LogitsDigest& digest);

}  // namespace vosti
