// The ann-benchmarks HDF5 layout (datasets train, test, neighbors, distances; attribute
// "distance": euclidean, angular, ...) read through Debian's libhdf5. Compiled in where CMake
// found HDF5 (GRAFT_BENCH_HDF5); elsewhere every call fails with a message saying so.
#ifndef GRAFT_BENCH_HDF5_DATASET_H
#define GRAFT_BENCH_HDF5_DATASET_H

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

// Reads the 2-D dataset `name` of the file as float32 (out: rows x cols, row-major). False with
// *err set when the file, the dataset or its shape is not usable.
bool hdf5_read_f32(const std::string& path, const char* name, std::vector<float>* out, int64_t* rows,
                   int64_t* cols, std::string* err);

// Same for an integer dataset (neighbors), as int64.
bool hdf5_read_i64(const std::string& path, const char* name, std::vector<int64_t>* out, int64_t* rows,
                   int64_t* cols, std::string* err);

// The file's string attribute `name` ("distance"); "" when it has none.
std::string hdf5_attribute(const std::string& path, const char* name);

}  // namespace bench

#endif
