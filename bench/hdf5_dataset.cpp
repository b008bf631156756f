#include "hdf5_dataset.h"

#ifdef GRAFT_BENCH_HDF5
#include <hdf5.h>
#endif

namespace bench {

#ifdef GRAFT_BENCH_HDF5

namespace {

// Reads a 2-D dataset converted to `mem_type` into out (resized to rows x cols of T).
template <class T>
bool read_2d(const std::string& path, const char* name, hid_t mem_type, std::vector<T>* out, int64_t* rows,
             int64_t* cols, std::string* err) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // our message instead of HDF5's error stack
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        *err = path + ": not an HDF5 file (or cannot be opened)";
        return false;
    }
    bool ok = false;
    const hid_t set = H5Dopen2(file, name, H5P_DEFAULT);
    if (set < 0) {
        *err = path + ": no dataset '" + name + "' (the ann-benchmarks layout has train, test, neighbors)";
    } else {
        const hid_t space = H5Dget_space(set);
        hsize_t dims[2] = {0, 0};
        if (H5Sget_simple_extent_ndims(space) != 2 || H5Sget_simple_extent_dims(space, dims, nullptr) != 2 ||
            dims[0] == 0 || dims[1] == 0) {
            *err = path + ": dataset '" + name + "' is not a non-empty 2-D matrix";
        } else {
            out->resize((size_t)(dims[0] * dims[1]));
            if (H5Dread(set, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->data()) < 0) {
                *err = path + ": cannot read dataset '" + name + "' as numbers";
            } else {
                *rows = (int64_t)dims[0];
                *cols = (int64_t)dims[1];
                ok = true;
            }
        }
        H5Sclose(space);
        H5Dclose(set);
    }
    H5Fclose(file);
    return ok;
}

}  // namespace

bool hdf5_read_f32(const std::string& path, const char* name, std::vector<float>* out, int64_t* rows,
                   int64_t* cols, std::string* err) {
    return read_2d(path, name, H5T_NATIVE_FLOAT, out, rows, cols, err);
}

bool hdf5_read_i64(const std::string& path, const char* name, std::vector<int64_t>* out, int64_t* rows,
                   int64_t* cols, std::string* err) {
    return read_2d(path, name, H5T_NATIVE_INT64, out, rows, cols, err);
}

std::string hdf5_attribute(const std::string& path, const char* name) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    std::string value;
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return value;
    if (H5Aexists(file, name) > 0) {
        const hid_t attr = H5Aopen(file, name, H5P_DEFAULT);
        const hid_t type = H5Aget_type(attr);
        if (H5Tget_class(type) == H5T_STRING) {
            if (H5Tis_variable_str(type) > 0) {
                char* s = nullptr;
                const hid_t mem = H5Tget_native_type(type, H5T_DIR_ASCEND);
                if (H5Aread(attr, mem, &s) >= 0 && s) {
                    value = s;
                    H5free_memory(s);
                }
                H5Tclose(mem);
            } else {
                std::vector<char> s(H5Tget_size(type) + 1, '\0');
                if (H5Aread(attr, type, s.data()) >= 0) value = s.data();
            }
        }
        H5Tclose(type);
        H5Aclose(attr);
    }
    H5Fclose(file);
    return value;
}

#else  // no HDF5 at build time

static bool no_hdf5(const std::string& path, std::string* err) {
    *err = path + ": this graft-bench was built without HDF5 (install libhdf5-dev and rebuild)";
    return false;
}
bool hdf5_read_f32(const std::string& path, const char*, std::vector<float>*, int64_t*, int64_t*,
                   std::string* err) {
    return no_hdf5(path, err);
}
bool hdf5_read_i64(const std::string& path, const char*, std::vector<int64_t>*, int64_t*, int64_t*,
                   std::string* err) {
    return no_hdf5(path, err);
}
std::string hdf5_attribute(const std::string&, const char*) { return ""; }

#endif

}  // namespace bench
