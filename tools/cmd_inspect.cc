// vosti inspect [MODEL]: what a model file holds, like gguf-dump. GGUF: version,
// alignment, every metadata key (long arrays summarised), the tensor table and
// totals per type. Safetensors (a model directory or one .safetensors file):
// config.json, metadata and the tensor table.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "tools/commands.h"

namespace vosti::tools {
namespace {

struct TensorRow {
  std::string name;
  std::vector<int64_t> shape;  // PyTorch order
  uint32_t type;
  size_t num_bytes;
};

std::string type_name(uint32_t type) {
  const WeightTypeTraits* t = weight_type_traits(type);
  return t ? std::string(t->name) : "type" + std::to_string(type);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string human_bytes(uint64_t n) {
  if (n >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(n) / (1 << 30));
  if (n >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(n) / (1 << 20));
  if (n >= (uint64_t{1} << 10)) return fmt::format("{:.2f} KiB", static_cast<double>(n) / (1 << 10));
  return fmt::format("{} B", n);
}

int64_t num_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void print_tensors(const std::vector<TensorRow>& rows) {
  size_t name_w = 4, shape_w = 5;
  for (const auto& r : rows) {
    name_w = std::max(name_w, r.name.size());
    shape_w = std::max(shape_w, shape_string(r.shape).size());
  }
  fmt::print("\ntensors ({}; shape in PyTorch order, outermost first):\n", rows.size());
  fmt::print("  {:>5}  {:<{}}  {:<{}}  {:<7}  {:>12}\n", "#", "name", name_w, "shape", shape_w, "type", "bytes");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    fmt::print("  {:>5}  {:<{}}  {:<{}}  {:<7}  {:>12}\n", i + 1, r.name, name_w, shape_string(r.shape), shape_w,
               type_name(r.type), r.num_bytes);
  }
  struct Total {
    size_t tensors = 0;
    int64_t elements = 0;
    uint64_t bytes = 0;
  };
  std::map<std::string, Total> per_type;
  Total all;
  for (const auto& r : rows) {
    for (Total* t : {&per_type[type_name(r.type)], &all}) {
      t->tensors += 1;
      t->elements += num_elements(r.shape);
      t->bytes += r.num_bytes;
    }
  }
  fmt::print("\ntotals per type:\n  {:<7}  {:>7}  {:>12}  {:>12}\n", "type", "tensors", "elements", "bytes");
  for (const auto& [name, t] : per_type) {
    fmt::print("  {:<7}  {:>7}  {:>12}  {:>12}  ({})\n", name, t.tensors, t.elements, t.bytes, human_bytes(t.bytes));
  }
  fmt::print("  {:<7}  {:>7}  {:>12}  {:>12}  ({})\n", "all", all.tensors, all.elements, all.bytes,
             human_bytes(all.bytes));
}

std::string gguf_value_type(const GgufValue& v) {
  if (v.type != GgufType::kArray) return std::string(gguf_type_name(v.type));
  return "[" + std::string(gguf_type_name(std::get<GgufArray>(v.value).element_type)) + "]";
}

Status inspect_gguf(const std::string& path, size_t max_items, bool tensors) {
  VOSTI_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
  fmt::print("{}\n  format: GGUF v{}, alignment {}, data section at byte {}\n", path, g.version(), g.alignment(),
             g.data_offset());
  if (auto arch = g.get_string("general.architecture"); arch.ok()) fmt::print("  architecture: {}\n", *arch);
  fmt::print("\nmetadata ({} keys):\n", g.metadata().size());
  size_t key_w = 0;
  for (const auto& [key, value] : g.metadata()) key_w = std::max(key_w, key.size());
  for (size_t i = 0; i < g.metadata().size(); ++i) {
    const auto& [key, value] = g.metadata()[i];
    fmt::print("  {:>5}  {:<9}  {:<{}} = {}\n", i + 1, gguf_value_type(value), key, key_w,
               value.to_display_string(max_items));
  }
  if (!tensors) return Status::ok_status();
  std::vector<TensorRow> rows;
  for (const auto& t : g.tensors()) {
    rows.push_back(
        {t.name, std::vector<int64_t>(t.dims.rbegin(), t.dims.rend()), static_cast<uint32_t>(t.type), t.num_bytes});
  }
  print_tensors(rows);
  return Status::ok_status();
}

std::vector<TensorRow> rows_of(const std::vector<WeightView>& views) {
  std::vector<TensorRow> rows;
  for (const auto& w : views) rows.push_back({w.name, w.shape, static_cast<uint32_t>(w.type), w.num_bytes});
  return rows;
}

Status inspect_safetensors_file(const std::string& path, bool tensors) {
  VOSTI_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::open(path));
  fmt::print("{}\n  format: safetensors, {} tensors\n", path, f.tensors().size());
  fmt::print("\n__metadata__ ({} keys):\n", f.metadata().size());
  for (const auto& [key, value] : f.metadata()) fmt::print("  {} = {}\n", key, value);
  if (tensors) print_tensors(rows_of(f.tensors()));
  return Status::ok_status();
}

Status inspect_safetensors_dir(const std::string& dir, bool tensors) {
  VOSTI_ASSIGN_OR_RETURN(SafetensorsModel m, SafetensorsModel::open(dir));
  fmt::print("{}\n  format: Hugging Face safetensors directory, {} tensors\n", dir, m.tensors().size());
  if (m.config().contains("architectures")) fmt::print("  architectures: {}\n", m.config()["architectures"].dump());
  fmt::print("\nconfig.json:\n{}\n", m.config().dump(2));
  if (!tensors) return Status::ok_status();
  std::vector<WeightView> views;
  for (const auto& [name, w] : m.tensors()) views.push_back(w);
  print_tensors(rows_of(views));
  return Status::ok_status();
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  CLI::App app{"Print a model's format, architecture, metadata and tensors (shapes, dtypes, quant types).",
               "vosti inspect"};
  std::string model = default_model_path();
  size_t max_items = 6;
  bool no_tensors = false;
  app.add_option("model", model, "GGUF file, .safetensors file or Hugging Face model directory")->capture_default_str();
  app.add_option("--max-array-items", max_items, "array items shown before an array is summarised")
      ->capture_default_str();
  app.add_flag("--no-tensors", no_tensors, "print the metadata only");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Status s;
  std::error_code ec;
  if (std::filesystem::is_directory(model, ec)) {
    s = inspect_safetensors_dir(model, !no_tensors);
  } else if (model.size() >= 12 && model.ends_with(".safetensors")) {
    s = inspect_safetensors_file(model, !no_tensors);
  } else {
    s = inspect_gguf(model, max_items, !no_tensors);
  }
  if (!s.ok()) {
    std::fflush(stdout);
    fmt::print(stderr, "vosti inspect: {}\n", s.to_string());
    return 1;
  }
  return 0;
}

}  // namespace vosti::tools
