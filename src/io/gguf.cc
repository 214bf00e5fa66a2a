#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

namespace vosti {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint32_t kMaxDims = 4;    // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 16;  // nested arrays deeper than this are rejected
// Each parsed value costs ~48 bytes, so the total is capped well above the
// largest real tokenizer tables (~1.3M values for a 262k vocabulary) to keep
// a garbage file from costing 48x its size in memory.
constexpr uint64_t kMaxArrayValues = uint64_t{1} << 24;
// Smallest encodings, used to reject counts the remaining bytes cannot hold
// before anything is allocated for them.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // key length, type, one-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset

// Bounds-checked little-endian cursor over the mapped bytes.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

  uint64_t array_values_ = 0;  // array items read so far (all arrays, nested too)

  size_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  // What is being read, for messages ("metadata key 'general.name'"); empty for none.
  void set_context(std::string context) { context_ = std::move(context); }

  Status error(const std::string& what) const {
    return data_loss(path_ + ": " + (context_.empty() ? "" : context_ + ": ") + what + " (at byte " +
                     std::to_string(pos_) + " of " + std::to_string(size_) + ")");
  }

  template <typename T>
  Status read(T* out, const char* what) {
    if (remaining() < sizeof(T)) return error(std::string("file ends inside ") + what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok_status();
  }

  Status read_string(std::string* out, const char* what) {
    uint64_t len = 0;
    VOSTI_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining()) {
      return error(std::string(what) + " has length " + std::to_string(len) + ", past the end of the file");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return Status::ok_status();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
  std::string context_;
};

// Bytes of the smallest encoding of one value of `type` (0 for an invalid type).
uint64_t min_value_bytes(uint32_t type) {
  switch (static_cast<GgufType>(type)) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
      return 8;
    case GgufType::kArray:
      return 4 + 8;
  }
  return 0;
}

template <typename Wire, typename Stored>
Status read_number(Reader& r, GgufValue* v, const char* what) {
  Wire w{};
  VOSTI_RETURN_IF_ERROR(r.read(&w, what));
  v->value = static_cast<Stored>(w);
  return Status::ok_status();
}

Status read_value(Reader& r, GgufType type, int depth, GgufValue* v);

Status read_array(Reader& r, int depth, GgufValue* v) {
  if (depth >= kMaxArrayDepth) return r.error("arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  uint32_t elem_type = 0;
  uint64_t count = 0;
  VOSTI_RETURN_IF_ERROR(r.read(&elem_type, "array element type"));
  const uint64_t min_bytes = min_value_bytes(elem_type);
  if (min_bytes == 0) return r.error("unknown array element type " + std::to_string(elem_type));
  VOSTI_RETURN_IF_ERROR(r.read(&count, "array length"));
  if (count > r.remaining() / min_bytes) {
    return r.error("array of " + std::to_string(count) + " " +
                   std::string(gguf_type_name(static_cast<GgufType>(elem_type))) +
                   " values cannot fit in the rest of the file (truncated?)");
  }
  if (count > kMaxArrayValues - r.array_values_) {
    return r.error("metadata arrays hold more than " + std::to_string(kMaxArrayValues) + " values in all");
  }
  r.array_values_ += count;
  GgufArray arr;
  arr.element_type = static_cast<GgufType>(elem_type);
  arr.items.resize(count);
  for (auto& item : arr.items) VOSTI_RETURN_IF_ERROR(read_value(r, arr.element_type, depth + 1, &item));
  v->value = std::move(arr);
  return Status::ok_status();
}

// Reads one value of a known-valid `type`.
Status read_value(Reader& r, GgufType type, int depth, GgufValue* v) {
  v->type = type;
  switch (type) {
    case GgufType::kUint8:
      return read_number<uint8_t, uint64_t>(r, v, "uint8 value");
    case GgufType::kInt8:
      return read_number<int8_t, int64_t>(r, v, "int8 value");
    case GgufType::kUint16:
      return read_number<uint16_t, uint64_t>(r, v, "uint16 value");
    case GgufType::kInt16:
      return read_number<int16_t, int64_t>(r, v, "int16 value");
    case GgufType::kUint32:
      return read_number<uint32_t, uint64_t>(r, v, "uint32 value");
    case GgufType::kInt32:
      return read_number<int32_t, int64_t>(r, v, "int32 value");
    case GgufType::kUint64:
      return read_number<uint64_t, uint64_t>(r, v, "uint64 value");
    case GgufType::kInt64:
      return read_number<int64_t, int64_t>(r, v, "int64 value");
    case GgufType::kFloat32:
      return read_number<float, double>(r, v, "float32 value");
    case GgufType::kFloat64:
      return read_number<double, double>(r, v, "float64 value");
    case GgufType::kBool: {
      uint8_t b = 0;
      VOSTI_RETURN_IF_ERROR(r.read(&b, "bool value"));
      if (b > 1) return r.error("bool value " + std::to_string(b) + " is neither 0 nor 1");
      v->value = b == 1;
      return Status::ok_status();
    }
    case GgufType::kString: {
      std::string s;
      VOSTI_RETURN_IF_ERROR(r.read_string(&s, "string value"));
      v->value = std::move(s);
      return Status::ok_status();
    }
    case GgufType::kArray:
      return read_array(r, depth, v);
  }
  return r.error("unknown value type");
}

Status read_header(Reader& r, const std::string& path, uint32_t* version, uint64_t* n_tensors, uint64_t* n_kv) {
  uint32_t magic = 0;
  if (r.remaining() < 4)
    return data_loss(path + ": file too short to be GGUF (" + std::to_string(r.remaining()) + " bytes)");
  VOSTI_RETURN_IF_ERROR(r.read(&magic, "magic"));
  if (magic != kMagic) return invalid_argument(path + ": not a GGUF file (bad magic)");
  VOSTI_RETURN_IF_ERROR(r.read(version, "version"));
  if (*version == 1)
    return unimplemented(path + ": GGUF version 1 is not supported (re-convert the model: v2 and v3 are)");
  if ((*version & 0xFFFF) == 0 && *version != 0) {
    return unimplemented(path + ": big-endian GGUF is not supported (version field " + std::to_string(*version) + ")");
  }
  if (*version != 2 && *version != 3) {
    return unimplemented(path + ": GGUF version " + std::to_string(*version) + " is not supported (v2 and v3 are)");
  }
  int64_t nt = 0, nk = 0;
  VOSTI_RETURN_IF_ERROR(r.read(&nt, "tensor count"));
  VOSTI_RETURN_IF_ERROR(r.read(&nk, "metadata count"));
  if (nt < 0 || static_cast<uint64_t>(nt) > r.remaining() / kMinTensorInfoBytes) {
    return r.error("tensor count " + std::to_string(nt) + " is impossible for the file size");
  }
  if (nk < 0 || static_cast<uint64_t>(nk) > r.remaining() / kMinKvBytes) {
    return r.error("metadata count " + std::to_string(nk) + " is impossible for the file size");
  }
  *n_tensors = static_cast<uint64_t>(nt);
  *n_kv = static_cast<uint64_t>(nk);
  return Status::ok_status();
}

// Reads one tensor info and checks its own consistency (dims, type, size).
Status read_tensor_info(Reader& r, GgufTensorInfo* ti) {
  VOSTI_RETURN_IF_ERROR(r.read_string(&ti->name, "tensor name"));
  const std::string where = "tensor '" + ti->name + "'";
  uint32_t n_dims = 0;
  VOSTI_RETURN_IF_ERROR(r.read(&n_dims, "tensor dimension count"));
  if (n_dims > kMaxDims) return r.error(where + " has " + std::to_string(n_dims) + " dimensions (at most 4)");
  ti->dims.resize(n_dims);
  uint64_t num_elements = 1;
  for (auto& d : ti->dims) {
    VOSTI_RETURN_IF_ERROR(r.read(&d, "tensor dimension"));
    if (d <= 0) return r.error(where + " has dimension " + std::to_string(d) + " (must be positive)");
    if (__builtin_mul_overflow(num_elements, static_cast<uint64_t>(d), &num_elements) ||
        num_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return r.error(where + " has dimensions whose product overflows int64");
    }
  }
  uint32_t type = 0;
  VOSTI_RETURN_IF_ERROR(r.read(&type, "tensor type"));
  const WeightTypeTraits* traits = weight_type_traits(type);
  if (traits == nullptr) return r.error(where + " has unknown ggml type " + std::to_string(type));
  ti->type = static_cast<WeightType>(type);
  const uint64_t inner = n_dims > 0 ? static_cast<uint64_t>(ti->dims[0]) : 1;
  if (inner % static_cast<uint64_t>(traits->block_elems) != 0) {
    return r.error(where + " has a row of " + std::to_string(inner) + " elements, not a multiple of the " +
                   std::string(traits->name) + " block size " + std::to_string(traits->block_elems));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(num_elements / static_cast<uint64_t>(traits->block_elems), traits->block_bytes, &bytes) ||
      bytes > std::numeric_limits<size_t>::max()) {
    return r.error(where + " is too large to address");
  }
  ti->num_bytes = static_cast<size_t>(bytes);
  return r.read(&ti->offset, "tensor offset");
}

}  // namespace

Result<GgufFile> GgufFile::open(const std::string& path) {
  VOSTI_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return parse(std::move(file));
}

Result<GgufFile> GgufFile::parse(std::shared_ptr<const MappedFile> file) {
  GgufFile g;
  g.path_ = file->path();
  Reader r(file->data(), file->size(), g.path_);
  uint64_t n_tensors = 0, n_kv = 0;
  VOSTI_RETURN_IF_ERROR(read_header(r, g.path_, &g.version_, &n_tensors, &n_kv));

  // The containers grow as entries are read, never reserved from the counts a file claims.
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    VOSTI_RETURN_IF_ERROR(r.read_string(&key, "metadata key"));
    uint32_t type = 0;
    VOSTI_RETURN_IF_ERROR(r.read(&type, "metadata value type"));
    r.set_context("metadata key '" + key + "'");
    if (min_value_bytes(type) == 0) return r.error("unknown value type " + std::to_string(type));
    GgufValue value;
    VOSTI_RETURN_IF_ERROR(read_value(r, static_cast<GgufType>(type), 0, &value));
    r.set_context("");
    if (!g.metadata_index_.emplace(key, g.metadata_.size()).second)
      return r.error("duplicate metadata key '" + key + "'");
    g.metadata_.emplace_back(std::move(key), std::move(value));
  }

  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo ti;
    VOSTI_RETURN_IF_ERROR(read_tensor_info(r, &ti));
    if (!g.tensor_index_.emplace(ti.name, g.tensors_.size()).second) {
      return r.error("duplicate tensor name '" + ti.name + "'");
    }
    g.tensors_.push_back(std::move(ti));
  }

  g.alignment_ = kDefaultAlignment;
  if (const GgufValue* a = g.find("general.alignment")) {
    auto v = a->as_int();
    if (!v.ok() || *v <= 0 || (*v & (*v - 1)) != 0 || *v > (int64_t{1} << 30)) {
      return data_loss(g.path_ + ": general.alignment must be a positive power of two, got " + a->to_display_string());
    }
    g.alignment_ = static_cast<uint64_t>(*v);
  }
  g.data_offset_ = (r.pos() + g.alignment_ - 1) / g.alignment_ * g.alignment_;
  VOSTI_RETURN_IF_ERROR(g.validate_tensor_ranges(file->size()));
  g.file_ = std::move(file);
  return g;
}

Status GgufFile::validate_tensor_ranges(uint64_t file_size) const {
  const uint64_t data_size = file_size > data_offset_ ? file_size - data_offset_ : 0;
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  for (const auto& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      return data_loss(path_ + ": tensor '" + t.name + "' offset " + std::to_string(t.offset) +
                       " is not a multiple of the alignment " + std::to_string(alignment_));
    }
    if (t.offset > data_size || t.num_bytes > data_size - t.offset) {
      return data_loss(path_ + ": tensor '" + t.name + "' (bytes " + std::to_string(t.offset) + ".." +
                       std::to_string(t.offset + t.num_bytes) + " of the data section) lies past the end of the file " +
                       "(data section holds " + std::to_string(data_size) + " bytes; truncated?)");
    }
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto& prev = tensors_[order[i - 1]];
    const auto& cur = tensors_[order[i]];
    if (cur.offset < prev.offset + prev.num_bytes) {
      return data_loss(path_ + ": tensors '" + prev.name + "' and '" + cur.name + "' overlap");
    }
  }
  return Status::ok_status();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

Result<const GgufValue*> GgufFile::find_required(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return not_found(path_ + ": metadata key '" + std::string(key) + "' not found");
  return v;
}

namespace {

template <typename T>
Result<T> with_key(Result<T> r, const std::string& path, std::string_view key) {
  if (r.ok()) return r;
  return r.status().with_context(path + ": metadata key '" + std::string(key) + "'");
}

template <typename T, typename Convert>
Result<std::vector<T>> array_of(const GgufValue& v, Convert convert) {
  if (v.type != GgufType::kArray) {
    return invalid_argument("value is " + std::string(gguf_type_name(v.type)) + ", expected an array");
  }
  std::vector<T> out;
  const auto& items = std::get<GgufArray>(v.value).items;
  out.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    auto item = convert(items[i]);
    if (!item.ok()) return item.status().with_context("item " + std::to_string(i));
    out.push_back(std::move(*item));
  }
  return out;
}

}  // namespace

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  VOSTI_ASSIGN_OR_RETURN(const GgufValue* v, find_required(key));
  return with_key(v->as_int(), path_, key);
}

Result<double> GgufFile::get_double(std::string_view key) const {
  VOSTI_ASSIGN_OR_RETURN(const GgufValue* v, find_required(key));
  return with_key(v->as_double(), path_, key);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  VOSTI_ASSIGN_OR_RETURN(const GgufValue* v, find_required(key));
  return with_key(v->as_bool(), path_, key);
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  VOSTI_ASSIGN_OR_RETURN(const GgufValue* v, find_required(key));
  return with_key(v->as_string(), path_, key);
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  VOSTI_ASSIGN_OR_RETURN(const GgufValue* v, find_required(key));
  return with_key(array_of<std::string>(*v, [](const GgufValue& x) { return x.as_string(); }), path_, key);
}

Result<std::vector<double>> GgufFile::get_double_array(std::string_view key) const {
  VOSTI_ASSIGN_OR_RETURN(const GgufValue* v, find_required(key));
  return with_key(array_of<double>(*v, [](const GgufValue& x) { return x.as_double(); }), path_, key);
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  VOSTI_ASSIGN_OR_RETURN(const GgufValue* v, find_required(key));
  return with_key(array_of<int64_t>(*v, [](const GgufValue& x) { return x.as_int(); }), path_, key);
}

Result<WeightView> GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) return not_found(path_ + ": no tensor named '" + std::string(name) + "'");
  const GgufTensorInfo& ti = tensors_[it->second];
  WeightView w;
  w.name = ti.name;
  w.type = ti.type;
  w.shape.assign(ti.dims.rbegin(), ti.dims.rend());
  w.data = file_->data() + data_offset_ + ti.offset;
  w.num_bytes = ti.num_bytes;
  w.owner = file_;
  return w;
}

}  // namespace vosti
