#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vosti {
namespace {

// Non-null address handed out for empty files (mmap rejects a zero length).
const uint8_t kEmptyFile[1] = {0};

std::string os_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const Status s(errno == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                   os_error("cannot open", path));
    return s;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const Status s = invalid_argument(os_error("cannot stat", path));
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("cannot map " + path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ == 0) {
    file->data_ = kEmptyFile;
    ::close(fd);
    return std::shared_ptr<const MappedFile>(std::move(file));
  }
  void* addr = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  if (addr == MAP_FAILED) {
    const Status s = resource_exhausted(os_error("cannot mmap", path));
    ::close(fd);
    return s;
  }
  ::close(fd);  // the mapping keeps the file alive
  file->data_ = static_cast<const uint8_t*>(addr);
  file->mapped_ = true;
  return std::shared_ptr<const MappedFile>(std::move(file));
}

std::shared_ptr<const MappedFile> MappedFile::from_bytes(const std::string& path, const void* bytes, size_t size) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = size;
  file->owned_.reset(new uint8_t[size]);  // exact size, so ASan sees any overread
  if (size > 0) std::memcpy(file->owned_.get(), bytes, size);
  file->data_ = file->owned_.get();
  return file;
}

MappedFile::~MappedFile() {
  if (mapped_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace vosti
