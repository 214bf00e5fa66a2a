#include "io/safetensors_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace vosti {

size_t safetensors_dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16" || dtype == "F16") return 2;
  return 0;
}

Status write_safetensors(const std::string& path, const std::vector<SafetensorsEntry>& entries) {
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
  const size_t total = 8 + text.size() + at;

  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return internal_error("cannot create " + path + ": " + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    const int err = errno;
    ::close(fd);
    return internal_error("cannot size " + path + " to " + std::to_string(total) + " bytes: " + std::strerror(err));
  }
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    const int err = errno;
    ::close(fd);
    return internal_error("cannot map " + path + ": " + std::strerror(err));
  }
  auto* bytes = static_cast<uint8_t*>(map);
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(len >> (8 * i));
  std::memcpy(bytes + 8, text.data(), text.size());
  uint8_t* data = bytes + 8 + text.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    const size_t end = i + 1 < entries.size() ? offsets[i + 1] : at;
    entries[i].fill(data + offsets[i], end - offsets[i]);
  }
  const bool synced = ::msync(map, total, MS_SYNC) == 0;
  ::munmap(map, total);
  ::close(fd);
  if (!synced) return internal_error("cannot write " + path + ": " + std::strerror(errno));
  return Status();
}

}  // namespace vosti
