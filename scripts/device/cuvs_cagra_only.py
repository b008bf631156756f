#!/usr/bin/env python3
"""Trims cuVS's object library to float32 CAGRA (scripts/device/build_cuvs.sh says why), and
lets GCC 12 build it.

    python3 scripts/device/cuvs_cagra_only.py CUVS_SRC/cpp/CMakeLists.txt

Puts a block after cuVS's add_library(cuvs_objs) that filters the library's sources with the
regular expressions below; run again after a change here, it replaces its block (and ninja then
configures again). The file is left as it is when nothing changes.
"""
import re
import sys

# Sources dropped, each line a reason.
DROP = [
    r"_data_(h|i8|u8)[_.]|_(half|int8|uint8|double)\\.cu$",  # other data types than float32
    r"src/(cluster|distance|preprocessing|stats)/",  # k-means, distances, quantizers (VPQ)
    r"src/neighbors/(all_neighbors|ball_cover|epsilon_neighborhood|composite|tiered_index)",
    r"src/neighbors/(dynamic_batching|sparse_brute_force|ivf_rabitq|ivf_sq|scann|vamana|ivf_flat)",
    r"iface_(flat|pq|cagra)_inst|generated_kernels/(ivf_flat|ivf_rabitq|ivf_sq|distance)/",
    r"src/neighbors/(ivf_pq/|refine/|brute_force)|generated_kernels/ivf_pq/",  # the IVF-PQ build
    r"cagra_(merge|extend|serialized)_inst",  # what graft-bench does not call
    r"compute_distance_vpq_inst|compute_distance_standard_.*metric_(L1|CosineExpanded|BitwiseHamming)",
]


def main(path):
    old = open(path).read()
    text = re.sub(r"  # graft: CAGRA_ONLY.*?  # graft: end\n", "", old, flags=re.S)
    anchor = "  set_target_properties(\n    cuvs_objs\n"
    if text.count(anchor) != 1:
        sys.exit(f"{path}: cuvs_objs' set_target_properties not found once")
    block = "  # graft: CAGRA_ONLY (scripts/device/cuvs_cagra_only.py)\n"
    block += "  get_target_property(_graft_srcs cuvs_objs SOURCES)\n"
    block += "".join(f'  list(FILTER _graft_srcs EXCLUDE REGEX "{d}")\n' for d in DROP)
    block += "  set_property(TARGET cuvs_objs PROPERTY SOURCES ${_graft_srcs})\n"
    # GCC 12 (Debian bookworm) reports a false -Wrestrict in std::string's operator+ here, and
    # cuVS builds with -Werror.
    block += ("  set_source_files_properties(src/detail/jit_lto/nvjitlink_checker.cpp PROPERTIES\n"
              "    COMPILE_OPTIONS -Wno-error=restrict)\n")
    block += "  # graft: end\n"
    new = text.replace(anchor, block + anchor)
    if new != old:
        open(path, "w").write(new)


if __name__ == "__main__":
    main(sys.argv[1])
