# What graft ships, described once: `cmake --install` and the .deb (CPack, below) both come from
# these rules. The CMake package (find_package(graft)) and graft.pc describe the same libraries.
#   lib/      libgraft_core (C core, GPU kernels inside), libgraft_faiss (FAISS adapter, target
#             graft::faiss_c), libgraft_faiss_capi (FAISS's C API, when built here), libgraft_mpi
#             (the index across MPI ranks, target graft::mpi, where MPI was found)
#   include/graft/   the C headers of both, and the adapter's C++ classes
#   lib/cmake/graft/ graft-config.cmake; lib/pkgconfig/graft.pc; bin/ the programs
include(CMakePackageConfigHelpers)
set(GRAFT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/graft)

set(_graft_libs graft_core graft_faiss)
if(GRAFT_BUNDLED_FAISS_C)
  list(APPEND _graft_libs faiss_c)
endif()
install(TARGETS ${_graft_libs} EXPORT graft-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY plugin/include/graft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${GRAFT_FAISS_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/graft)
install(TARGETS faiss_swap graph_build RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT graft-targets NAMESPACE graft:: DESTINATION ${GRAFT_CMAKE_DIR})
# The index across MPI ranks (adapters/mpi), where it was built: libgraft_mpi and its headers, in
# an export set of its own (graft::mpi), which graft-config.cmake loads where MPI is found.
if(TARGET graft_mpi)
  install(TARGETS graft_mpi EXPORT graft-mpi-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES adapters/mpi/graft_mpi_c.h adapters/mpi/GraftIndexMPI.h adapters/mpi/mpi_deadline.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/graft)
  install(EXPORT graft-mpi-targets NAMESPACE graft:: DESTINATION ${GRAFT_CMAKE_DIR})
endif()

configure_package_config_file(cmake/graft-config.cmake.in ${CMAKE_BINARY_DIR}/graft-config.cmake
                              INSTALL_DESTINATION ${GRAFT_CMAKE_DIR})
# 0.x: a new minor version may break the ABI (the SONAME says which).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/graft-config-version.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/graft-config.cmake ${CMAKE_BINARY_DIR}/graft-config-version.cmake
        DESTINATION ${GRAFT_CMAKE_DIR})

# ---- graft.pc -----------------------------------------------------------------------------------
# The prefix is found from the .pc file's own place (${pcfiledir}), so the same file serves
# cmake --install into any prefix and the .deb's /usr. FAISS has no .pc file: a shared graft
# holds Debian's static FAISS in libgraft_faiss_capi (cmake/faiss.cmake); a static graft leaves it
# (with BLAS/LAPACK, OpenMP and the C++ runtime) to the program's link, so it is in Libs.
file(RELATIVE_PATH _pc_to_prefix "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
set(GRAFT_PC_LIBS "-lgraft_faiss")
if(GRAFT_BUNDLED_FAISS_C)
  string(APPEND GRAFT_PC_LIBS " -lgraft_faiss_capi")
else()
  string(APPEND GRAFT_PC_LIBS " $<TARGET_FILE:faiss_c>")  # FAISS's own, wherever it is installed
endif()
string(APPEND GRAFT_PC_LIBS " -lgraft_core")
set(_pc_deps "")
if(NOT GRAFT_FAISS_EMBED)
  list(APPEND _pc_deps "$<TARGET_FILE:faiss>")
  get_target_property(_faiss_deps faiss INTERFACE_LINK_LIBRARIES)
  if(NOT _faiss_deps)
    set(_faiss_deps "")  # a shared libfaiss states none
  endif()
  foreach(_dep IN LISTS _faiss_deps)
    if(NOT _dep MATCHES "^\\$<|::" AND NOT _dep IN_LIST _pc_deps)
      list(APPEND _pc_deps ${_dep})
    endif()
  endforeach()
  list(APPEND _pc_deps ${OpenMP_CXX_FLAGS} -lstdc++)
endif()
if(NOT BUILD_SHARED_LIBS)
  list(APPEND _pc_deps -lz)
  if(GRAFT_HAVE_CUDA)
    list(APPEND _pc_deps -L${CUDAToolkit_LIBRARY_DIR} -lcublas -lcudart_static -ldl -lrt -lpthread)
  endif()
endif()
list(APPEND _pc_deps -lm)
if(GRAFT_FAISS_LIBDIR)
  # A FAISS in its own prefix: programs find its shared libraries at run time where graft did.
  list(APPEND _pc_deps "-Wl,-rpath,${GRAFT_FAISS_LIBDIR}")
endif()
list(JOIN _pc_deps " " GRAFT_PC_DEPS)
set(GRAFT_PC_CFLAGS "")
foreach(_inc IN LISTS _faiss_inc)
  if(NOT _inc IN_LIST CMAKE_C_IMPLICIT_INCLUDE_DIRECTORIES)
    string(APPEND GRAFT_PC_CFLAGS " -I${_inc}")
  endif()
endforeach()
configure_file(cmake/graft.pc.in ${CMAKE_BINARY_DIR}/graft.pc.in @ONLY)
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/graft.pc INPUT ${CMAKE_BINARY_DIR}/graft.pc.in)
install(FILES ${CMAKE_BINARY_DIR}/graft.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- the .deb: cpack -G DEB (in the build folder) -----------------------------------------------
# One package, graft_<version>+faiss<FAISS version>_<arch>.deb (e.g. graft_0.2.0+faiss1.7.3_amd64.deb),
# installing into /usr. Its dependencies are stated here rather than found by dpkg-shlibdeps,
# because NVIDIA's runfile installs of CUDA (as on our build machines) are unknown to dpkg: FAISS
# of the same upstream version (the adapter and the C API are compiled against its headers;
# Debian's libfaiss-dev when graft was built against it, none for a FAISS of its own prefix, which
# the package then names in its description), and NVIDIA's CUDA runtime and cuBLAS packages of the
# toolkit built with. GRAFT_DEB_CUDA_DEPENDS=OFF leaves the CUDA ones out, for machines whose CUDA
# dpkg does not know either.
option(GRAFT_DEB_CUDA_DEPENDS "State NVIDIA's CUDA packages as dependencies of the .deb" ON)
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME graft)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_DEBIAN_PACKAGE_VERSION "${PROJECT_VERSION}+faiss${GRAFT_FAISS_VERSION}")
set(CPACK_PACKAGE_CONTACT "graft maintainers <maintainers@users.noreply.a-seed-2c153117.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "GPU graph indexes for FAISS (GraftFlat, GraftGraph, GraftGraph,PQ)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # shlibs file + ldconfig trigger
string(REGEX MATCH "^[0-9]+\\.[0-9]+\\.[0-9]+" _fv "${GRAFT_FAISS_VERSION}")
string(REGEX REPLACE "^([0-9]+\\.[0-9]+)\\.([0-9]+)$" "\\1" _fv_mm "${_fv}")
string(REGEX REPLACE "^[0-9]+\\.[0-9]+\\.([0-9]+)$" "\\1" _fv_patch "${_fv}")
math(EXPR _fv_next "${_fv_patch} + 1")
set(_deb_deps "libc6, libstdc++6, libgomp1, zlib1g")
if(GRAFT_FAISS_LIBDIR)
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
      "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}; built against FAISS ${_fv} in ${GRAFT_FAISS_LIBDIR} (not a Debian package)")
else()
  string(APPEND _deb_deps ", libfaiss-dev (>= ${_fv}), libfaiss-dev (<< ${_fv_mm}.${_fv_next})")
endif()
if(GRAFT_HAVE_CUDA)
  set(_cuda_pkg "${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR}")
  string(REPLACE ";" " " _archs_summary "${CMAKE_CUDA_ARCHITECTURES}")
  if(GRAFT_DEB_CUDA_DEPENDS)
    string(APPEND _deb_deps ", cuda-cudart-${_cuda_pkg}, libcublas-${_cuda_pkg}")
  endif()
  set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
      "${CPACK_PACKAGE_DESCRIPTION_SUMMARY}; CUDA ${CUDAToolkit_VERSION_MAJOR}.${CUDAToolkit_VERSION_MINOR}, architectures ${_archs_summary}")
endif()
if(TARGET graft_mpi)
  # libgraft_mpi, and the Python module built with it, load Open MPI's libmpi.
  string(APPEND _deb_deps ", libopenmpi3")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_deb_deps}")
if(GRAFT_PYTHON_BUILT AND NOT GRAFT_FAISS_LIBDIR)
  # The Python package (adapters/python) imports Debian's FAISS module of the same version.
  set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-faiss (>= ${_fv}), python3-faiss (<< ${_fv_mm}.${_fv_next}), python3-numpy")
endif()
include(CPack)
