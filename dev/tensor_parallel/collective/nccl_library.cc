// NcclLibrary and NcclGroup: dlopen of libnccl.so.2 and the communicators of one group.
#include "kernels/cuda/collective/nccl_library.h"

#include <dlfcn.h>

#include <utility>

namespace vosti {
namespace {

constexpr const char* kNcclSoname = "libnccl.so.2";

template <typename Fn>
Status bind(void* handle, const char* name, Fn*& fn) {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    const char* why = dlerror();
    return failed_precondition(std::string(kNcclSoname) + " has no " + name + (why != nullptr ? ": " : "") +
                               (why != nullptr ? why : ""));
  }
  fn = reinterpret_cast<Fn*>(symbol);
  return Status();
}

}  // namespace

Result<std::shared_ptr<const NcclLibrary>> NcclLibrary::load() {
  void* handle = dlopen(kNcclSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return failed_precondition(
        std::string("tensor parallelism needs NCCL, and ") + kNcclSoname + " could not be opened (" +
        (why != nullptr ? why : "unknown reason") +
        "): put the directory holding it (the CUDA toolkit's lib64, or python3 -c 'import "
        "nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))'/lib) on LD_LIBRARY_PATH");
  }
  std::shared_ptr<NcclLibrary> lib(new NcclLibrary());
  lib->handle_ = handle;
  nccl_abi::Result (*get_version)(int*) = nullptr;
  VOSTI_RETURN_IF_ERROR(bind(handle, "ncclGetVersion", get_version));
  VOSTI_RETURN_IF_ERROR(bind(handle, "ncclCommInitAll", lib->comm_init_all));
  VOSTI_RETURN_IF_ERROR(bind(handle, "ncclCommDestroy", lib->comm_destroy));
  VOSTI_RETURN_IF_ERROR(bind(handle, "ncclCommAbort", lib->comm_abort));
  VOSTI_RETURN_IF_ERROR(bind(handle, "ncclAllGather", lib->all_gather));
  VOSTI_RETURN_IF_ERROR(bind(handle, "ncclAllReduce", lib->all_reduce));
  VOSTI_RETURN_IF_ERROR(bind(handle, "ncclGetErrorString", lib->error_string));
  VOSTI_RETURN_IF_ERROR(lib->status(get_version(&lib->version_), "ncclGetVersion"));
  if (lib->version_ < 20900) {  // CUDA graph capture of collectives: NCCL 2.9
    return failed_precondition("NCCL " + std::to_string(lib->version_) +
                               " is too old: tensor parallelism needs NCCL 2.9 or newer (CUDA graphs)");
  }
  return std::shared_ptr<const NcclLibrary>(std::move(lib));
}

NcclLibrary::~NcclLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

Status NcclLibrary::status(nccl_abi::Result r, const char* what) const {
  if (r == nccl_abi::kSuccess) return Status();
  const char* message = error_string != nullptr ? error_string(r) : "unknown";
  return internal_error(std::string(what) + ": NCCL error " + std::to_string(r) + " (" + message + ")");
}

Result<NcclGroup> NcclGroup::create(std::shared_ptr<const NcclLibrary> nccl, std::span<const int> devices) {
  if (devices.empty()) return invalid_argument("an NCCL group needs at least one device");
  NcclGroup g;
  g.comms_.assign(devices.size(), nullptr);
  VOSTI_RETURN_IF_ERROR(nccl->status(
      nccl->comm_init_all(g.comms_.data(), static_cast<int>(devices.size()), devices.data()), "ncclCommInitAll"));
  g.nccl_ = std::move(nccl);
  return g;
}

NcclGroup::NcclGroup(NcclGroup&& other) noexcept { *this = std::move(other); }

NcclGroup& NcclGroup::operator=(NcclGroup&& other) noexcept {
  if (this != &other) {
    release();
    nccl_ = std::move(other.nccl_);
    comms_ = std::move(other.comms_);
    aborted_ = other.aborted_;
    other.comms_.clear();
  }
  return *this;
}

NcclGroup::~NcclGroup() { release(); }

void NcclGroup::abort() {
  if (aborted_ || !nccl_) return;
  for (nccl_abi::CommHandle c : comms_)
    if (c != nullptr) (void)nccl_->comm_abort(c);
  aborted_ = true;
}

void NcclGroup::release() {
  if (nccl_ && !aborted_) {
    for (nccl_abi::CommHandle c : comms_)
      if (c != nullptr) (void)nccl_->comm_destroy(c);
  }
  comms_.clear();
  nccl_.reset();
  aborted_ = false;
}

}  // namespace vosti
