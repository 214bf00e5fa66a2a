// fuzz-libs: vosti_io
// Fuzzes SafetensorsFile::parse: header length, JSON header, dtypes, shapes and
// offsets. Accepted tensors must lie inside the input and match dtype x shape.
#include <cstddef>
#include <cstdint>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = vosti::MappedFile::from_bytes("fuzz.safetensors", data, size);
  auto f = vosti::SafetensorsFile::parse(file);
  if (!f.ok()) return 0;
  for (const auto& w : f->tensors()) {
    const auto* traits = vosti::weight_type_traits(static_cast<uint32_t>(w.type));
    VOSTI_CHECK(traits != nullptr && traits->dequant_supported, "unsupported dtype accepted");
    VOSTI_CHECK(static_cast<size_t>(w.num_elements()) * traits->block_bytes == w.num_bytes, "size mismatch accepted");
    VOSTI_CHECK(w.data >= file->data() && static_cast<size_t>(w.data - file->data()) + w.num_bytes <= size,
                "tensor view outside the file");
  }
  return 0;
}
