#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

namespace vosti {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the limit of HF's safetensors
constexpr int kMaxJsonDepth = 32;                  // deeper values are dropped (and so rejected)

struct DtypeInfo {
  const char* name;
  WeightType type;
  size_t size;
};

constexpr DtypeInfo kSupportedDtypes[] = {
    {"F32", WeightType::kF32, 4},
    {"F16", WeightType::kF16, 2},
    {"BF16", WeightType::kBF16, 2},
};
// The other dtypes HF safetensors defines: valid files Vosti does not load.
constexpr const char* kUnsupportedDtypes[] = {"F64",     "I64",     "I32",     "I16",     "I8",  "U8",
                                              "U16",     "U32",     "U64",     "BOOL",    "C64", "F8_E4M3",
                                              "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"};

// Parses JSON text; a duplicate key in the top-level object or nesting deeper
// than kMaxJsonDepth is an error. `what` names the text in messages.
Result<json> parse_json(const char* begin, const char* end, const std::string& what) {
  std::set<std::string> top_keys;
  std::string duplicate;
  bool too_deep = false;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > kMaxJsonDepth) {
      too_deep = true;
      return false;
    }
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      if (!top_keys.insert(parsed.get_ref<const std::string&>()).second && duplicate.empty()) {
        duplicate = parsed.get_ref<const std::string&>();
      }
    }
    return true;
  };
  json j;
  try {
    j = json::parse(begin, end, callback);
  } catch (const json::exception& e) {
    return data_loss(what + ": invalid JSON: " + e.what());
  }
  if (too_deep) return data_loss(what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  if (!duplicate.empty()) return data_loss(what + ": duplicate key '" + duplicate + "'");
  return j;
}

bool as_u64(const json& v, uint64_t* out) {
  if (!v.is_number_integer()) return false;
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  const int64_t s = v.get<int64_t>();
  if (s < 0) return false;
  *out = static_cast<uint64_t>(s);
  return true;
}

struct TensorEntry {
  WeightView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Checks one header entry against its dtype and shape; fills `entry` (data pointer set later).
Status parse_entry(const std::string& path, const std::string& name, const json& info, TensorEntry* entry) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!info.is_object()) return data_loss(where + ": header entry is not an object");
  auto dtype_it = info.find("dtype");
  auto shape_it = info.find("shape");
  auto offsets_it = info.find("data_offsets");
  if (dtype_it == info.end() || !dtype_it->is_string()) return data_loss(where + ": missing string 'dtype'");
  if (shape_it == info.end() || !shape_it->is_array()) return data_loss(where + ": missing array 'shape'");
  if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !as_u64((*offsets_it)[0], &entry->begin) || !as_u64((*offsets_it)[1], &entry->end)) {
    return data_loss(where + ": 'data_offsets' must be two non-negative integers [begin, end]");
  }
  const std::string& dtype_name = dtype_it->get_ref<const std::string&>();
  const DtypeInfo* dtype = nullptr;
  for (const auto& d : kSupportedDtypes) {
    if (dtype_name == d.name) dtype = &d;
  }
  if (dtype == nullptr) {
    for (const char* d : kUnsupportedDtypes) {
      if (dtype_name == d) {
        return unimplemented(where + " has dtype " + dtype_name + "; Vosti loads F32, F16 and BF16 safetensors");
      }
    }
    return data_loss(where + ": unknown dtype '" + dtype_name + "'");
  }
  uint64_t num_elements = 1;
  for (const auto& d : *shape_it) {
    uint64_t dim = 0;
    if (!as_u64(d, &dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return data_loss(where + ": shape entries must be non-negative integers");
    }
    if (__builtin_mul_overflow(num_elements, dim, &num_elements) ||
        num_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return data_loss(where + ": shape product overflows int64");
    }
    entry->view.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(num_elements, dtype->size, &bytes)) return data_loss(where + ": byte size overflows");
  if (entry->end < entry->begin || entry->end - entry->begin != bytes) {
    return data_loss(where + ": data_offsets [" + std::to_string(entry->begin) + ", " + std::to_string(entry->end) +
                     "] do not hold the " + std::to_string(bytes) + " bytes its dtype and shape need");
  }
  entry->view.name = name;
  entry->view.type = dtype->type;
  entry->view.num_bytes = static_cast<size_t>(bytes);
  return Status::ok_status();
}

// Like HF safetensors: sorted by offset the tensors tile the data section exactly.
Status check_layout(const std::string& path, std::vector<TensorEntry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.end > data_size) {
      return data_loss(path + ": tensor '" + e.view.name + "' ends at byte " + std::to_string(e.end) +
                       " of the data section, which holds only " + std::to_string(data_size) + " bytes (truncated?)");
    }
    if (e.begin != expected) {
      return data_loss(path + ": tensor '" + e.view.name + "' starts at byte " + std::to_string(e.begin) +
                       " of the data section but the previous tensor ends at " + std::to_string(expected) +
                       (e.begin < expected ? " (overlap)" : " (gap)"));
    }
    expected = e.end;
  }
  if (expected != data_size) {
    return data_loss(path + ": tensors cover " + std::to_string(expected) + " bytes but the data section holds " +
                     std::to_string(data_size) + " (trailing bytes)");
  }
  return Status::ok_status();
}

bool is_plain_relative_path(const std::string& p) {
  if (p.empty() || p.front() == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t slash = p.find('/', start);
    if (slash == std::string::npos) slash = p.size();
    const std::string part = p.substr(start, slash - start);
    if (part == ".." || part.empty()) return false;
    start = slash + 1;
  }
  return true;
}

Result<json> read_json_file(const std::string& path) {
  VOSTI_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const char* text = reinterpret_cast<const char*>(file->data());
  VOSTI_ASSIGN_OR_RETURN(json j, parse_json(text, text + file->size(), path));
  if (!j.is_object()) return data_loss(path + ": expected a JSON object");
  return j;
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  VOSTI_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return parse(std::move(file));
}

Result<SafetensorsFile> SafetensorsFile::parse(std::shared_ptr<const MappedFile> file) {
  const std::string& path = file->path();
  if (file->size() < 8)
    return data_loss(path + ": too short for a safetensors file (" + std::to_string(file->size()) + " bytes)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, file->data(), 8);
  if (header_len > kMaxHeaderBytes) {
    return data_loss(path + ": header length " + std::to_string(header_len) +
                     " exceeds the 100 MB limit (not safetensors?)");
  }
  if (header_len > file->size() - 8) {
    return data_loss(path + ": header length " + std::to_string(header_len) + " runs past the end of the file (" +
                     std::to_string(file->size()) + " bytes)");
  }
  const char* header = reinterpret_cast<const char*>(file->data() + 8);
  if (header_len == 0 || header[0] != '{')
    return data_loss(path + ": header does not start with '{' (not safetensors?)");
  VOSTI_ASSIGN_OR_RETURN(json j, parse_json(header, header + header_len, path + ": header"));
  if (!j.is_object()) return data_loss(path + ": header is not a JSON object");

  SafetensorsFile out;
  std::vector<TensorEntry> entries;
  for (const auto& [name, info] : j.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) return data_loss(path + ": __metadata__ is not an object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) return data_loss(path + ": __metadata__ value of '" + key + "' is not a string");
        out.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    TensorEntry entry;
    VOSTI_RETURN_IF_ERROR(parse_entry(path, name, info, &entry));
    entries.push_back(std::move(entry));
  }
  const uint64_t data_start = 8 + header_len;
  VOSTI_RETURN_IF_ERROR(check_layout(path, entries, file->size() - data_start));
  out.tensors_.reserve(entries.size());
  for (auto& e : entries) {
    e.view.data = file->data() + data_start + e.begin;
    e.view.owner = file;
    out.tensors_.push_back(std::move(e.view));
  }
  return out;
}

Result<SafetensorsModel> SafetensorsModel::open(const std::string& dir) {
  SafetensorsModel m;
  m.dir_ = dir;
  VOSTI_ASSIGN_OR_RETURN(m.config_, read_json_file(dir + "/config.json"));

  const std::string index_path = dir + "/model.safetensors.index.json";
  auto index_file = MappedFile::open(index_path);
  if (!index_file.ok() && index_file.status().code() != StatusCode::kNotFound) return index_file.status();
  if (!index_file.ok()) {
    VOSTI_ASSIGN_OR_RETURN(auto single, SafetensorsFile::open(dir + "/model.safetensors"));
    for (const auto& t : single.tensors()) m.tensors_.emplace(t.name, t);
    return m;
  }

  VOSTI_ASSIGN_OR_RETURN(json index, read_json_file(index_path));
  auto map_it = index.find("weight_map");
  if (map_it == index.end() || !map_it->is_object()) return data_loss(index_path + ": missing object 'weight_map'");
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name
  std::set<std::string> shards;
  for (const auto& [name, shard] : map_it->items()) {
    if (!shard.is_string() || !is_plain_relative_path(shard.get<std::string>())) {
      return data_loss(index_path + ": shard of tensor '" + name + "' must be a file name inside " + dir);
    }
    weight_map[name] = shard.get<std::string>();
    shards.insert(shard.get<std::string>());
  }
  for (const auto& shard : shards) {
    const std::string shard_path = dir + "/" + shard;
    VOSTI_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(shard_path));
    for (const auto& t : file.tensors()) {
      if (!m.tensors_.emplace(t.name, t).second) {
        return data_loss(shard_path + ": tensor '" + t.name + "' also appears in another shard");
      }
      auto it = weight_map.find(t.name);
      if (it != weight_map.end() && it->second != shard) {
        return data_loss(index_path + ": tensor '" + t.name + "' is listed in " + it->second + " but stored in " +
                         shard);
      }
    }
  }
  for (const auto& [name, shard] : weight_map) {
    if (m.tensors_.find(name) == m.tensors_.end()) {
      return data_loss(index_path + ": tensor '" + name + "' is listed in " + shard + " but that shard lacks it");
    }
  }
  return m;
}

Result<WeightView> SafetensorsModel::tensor(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return not_found(dir_ + ": no tensor named '" + std::string(name) + "'");
  return it->second;
}

}  // namespace vosti
