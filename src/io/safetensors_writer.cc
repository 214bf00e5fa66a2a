#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

namespace vosti {

size_t safetensors_dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  return 0;
}

Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries, int num_threads) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::vector<size_t> offsets;
  size_t at = 0;
  for (const SafetensorsEntry& e : entries) {
    const size_t elem = safetensors_dtype_bytes(e.dtype);
    if (elem == 0) return invalid_argument(path + ": tensor " + e.name + " has unknown dtype " + e.dtype);
    size_t n = elem;
    for (int64_t d : e.shape) n *= static_cast<size_t>(d);
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + n}}};
    offsets.push_back(at);
    at += n;
  }
  header["__metadata__"] = {{"format", "pt"}, {"written_by", "vosti make-model"}};
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return internal_error("cannot create " + path + ": " + std::strerror(errno));
  std::string head(8, '\0');
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) head[static_cast<size_t>(i)] = static_cast<char>(len >> (8 * i));
  head += text;
  const size_t data_start = head.size();
  // Chunks of at most kChunk bytes, in file order; workers take the next one.
  constexpr size_t kChunk = size_t{8} << 20;
  struct Chunk {
    size_t entry, offset, bytes;
  };
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t end = i + 1 < entries.size() ? offsets[i + 1] : at;
    for (size_t o = 0; o < end - offsets[i]; o += kChunk)
      chunks.push_back({i, o, std::min(kChunk, end - offsets[i] - o)});
  }
  std::atomic<size_t> next{0};
  std::atomic<int> error{0};
  const auto write_all = [fd](const uint8_t* p, size_t n, size_t where) {
    while (n > 0) {
      const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(where));
      if (w <= 0) return errno != 0 ? errno : EIO;
      p += w;
      n -= static_cast<size_t>(w);
      where += static_cast<size_t>(w);
    }
    return 0;
  };
  if (const int e = write_all(reinterpret_cast<const uint8_t*>(head.data()), head.size(), 0); e != 0) {
    ::close(fd);
    return internal_error("cannot write " + path + ": " + std::strerror(e));
  }
  const auto worker = [&] {
    std::vector<uint8_t> buf(kChunk);
    for (size_t c = next++; c < chunks.size() && error.load() == 0; c = next++) {
      const Chunk& k = chunks[c];
      entries[k.entry].fill(buf.data(), k.offset, k.bytes);
      if (const int e = write_all(buf.data(), k.bytes, data_start + offsets[k.entry] + k.offset); e != 0) error = e;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, num_threads); ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  const bool closed = ::close(fd) == 0;
  if (error.load() != 0) return internal_error("cannot write " + path + ": " + std::strerror(error.load()));
  if (!closed) return internal_error("cannot close " + path + ": " + std::strerror(errno));
  return Status();
}

}  // namespace vosti
