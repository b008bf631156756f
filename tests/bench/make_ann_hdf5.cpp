// Writes vector files in the ann-benchmarks HDF5 layout (train, test, neighbors; attribute
// "distance"), so that test_graft_bench can read a real dataset through graft-bench's HDF5 path.
//   make_ann_hdf5 BASE QUERY GT OUT.hdf5 DISTANCE
#include <hdf5.h>

#include <cstdio>
#include <cstring>

#include "graft/dataset.h"

static bool write_set(hid_t file, const char* name, hid_t type, const graft_dataset& m) {
    hsize_t dims[2] = {(hsize_t)m.n, (hsize_t)m.d};
    const hid_t space = H5Screate_simple(2, dims, nullptr);
    const hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const bool ok = set >= 0 && H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.data) >= 0;
    if (set >= 0) H5Dclose(set);
    H5Sclose(space);
    return ok;
}

int main(int argc, char** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: make_ann_hdf5 BASE QUERY GT OUT.hdf5 DISTANCE\n");
        return 2;
    }
    graft_dataset base, query, gt;
    if (graft_dataset_read(argv[1], 0, -1, &base) || graft_dataset_read(argv[2], 0, -1, &query) ||
        graft_dataset_read(argv[3], 0, -1, &gt) || base.dtype != GRAFT_DTYPE_F32 || gt.dtype != GRAFT_DTYPE_I32) {
        fprintf(stderr, "make_ann_hdf5: %s\n", graft_last_error());
        return 1;
    }
    const hid_t file = H5Fcreate(argv[4], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    bool ok = file >= 0 && write_set(file, "train", H5T_NATIVE_FLOAT, base) &&
              write_set(file, "test", H5T_NATIVE_FLOAT, query) && write_set(file, "neighbors", H5T_NATIVE_INT32, gt);
    if (ok) {
        const hid_t type = H5Tcopy(H5T_C_S1);
        H5Tset_size(type, strlen(argv[5]) + 1);
        const hid_t space = H5Screate(H5S_SCALAR);
        const hid_t attr = H5Acreate2(file, "distance", type, space, H5P_DEFAULT, H5P_DEFAULT);
        ok = attr >= 0 && H5Awrite(attr, type, argv[5]) >= 0;
        if (attr >= 0) H5Aclose(attr);
        H5Sclose(space);
        H5Tclose(type);
    }
    if (file >= 0) H5Fclose(file);
    graft_dataset_free(&base);
    graft_dataset_free(&query);
    graft_dataset_free(&gt);
    if (!ok) fprintf(stderr, "make_ann_hdf5: cannot write %s\n", argv[4]);
    return ok ? 0 : 1;
}
