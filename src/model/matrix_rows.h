// MatrixRowTables: the row tables a FloatTensor::matrix views (model/model.h), shared by
// the loader and the Model constructor. Internal to the model library.
// Thread safety: immutable once attached.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"

namespace vosti {

struct MatrixRowTables {
  std::vector<std::shared_ptr<const void>> owners;  // what holds the rows' bytes (mappings, buffers)
  std::vector<const uint8_t*> rows;                 // [n]: start of each output row's k values
  std::vector<WeightType> part_types;               // [num_parts]
  std::vector<int64_t> part_rows;                   // [num_parts]
  std::vector<WeightRows> parts;                    // [num_parts], built by attach_matrix
};

// Points t.matrix at `tables` (rows [n], k values each) and makes t.owner keep them (and
// t's previous owner) alive.
void attach_matrix(FloatTensor& t, std::shared_ptr<MatrixRowTables> tables, int64_t k);

}  // namespace vosti
