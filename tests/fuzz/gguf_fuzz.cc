// fuzz-libs: vosti_io
// Fuzzes GgufFile::parse and everything a loader does with a parsed file:
// typed getters, display strings, tensor views (checked to lie inside the
// input) and dequantisation of small tensors. Any crash or sanitizer report fails.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/dequant.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = vosti::MappedFile::from_bytes("fuzz.gguf", data, size);
  auto g = vosti::GgufFile::parse(file);
  if (!g.ok()) return 0;
  for (const auto& [key, value] : g->metadata()) {
    (void)value.to_display_string();
    (void)g->get_int(key);
    (void)g->get_double(key);
    (void)g->get_string_array(key);
    (void)g->get_int_array(key);
  }
  for (const auto& info : g->tensors()) {
    auto w = g->tensor(info.name);
    VOSTI_CHECK(w.ok(), "a listed tensor is not found");
    VOSTI_CHECK(w->data >= file->data() && w->num_bytes <= size &&
                    static_cast<size_t>(w->data - file->data()) <= size - w->num_bytes,
                "tensor view outside the file");
    const auto* traits = vosti::weight_type_traits(static_cast<uint32_t>(w->type));
    VOSTI_CHECK(traits != nullptr, "tensor of unknown type accepted");
    if (traits->dequant_supported && w->num_elements() <= (1 << 16)) {
      std::vector<float> out(static_cast<size_t>(w->num_elements()));
      const vosti::Status s = vosti::dequantize(w->type, w->data, w->num_bytes, out.data(), w->num_elements());
      VOSTI_CHECK(s.ok(), s.to_string());
    }
  }
  return 0;
}
