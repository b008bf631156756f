# Provides the targets `faiss` (libfaiss, CPU) and `faiss_c` (FAISS's C API), and
# graft_use_faiss(target) for graft's libraries that call FAISS. The one place in the build that
# knows FAISS versions apart (adapters/faiss/faiss_compat.h is the one in the code).
#
# FAISS: the one CMake finds, FAISS 1.7.3 to 1.15: the system's (Debian's libfaiss-dev 1.7.3), or
# any FAISS installed with its CMake package (conda, a source build) under CMAKE_PREFIX_PATH; or an
# unpacked .deb under GRAFT_FAISS_ROOT (the GPU machine has no FAISS: the .deb travels with the
# call). GRAFT_FAISS_VERSION is its version.
# faiss_c: FAISS's own C API where its package exports one (FAISS >= 1.8 built with
# FAISS_ENABLE_C_API), else an installed libfaiss_c (conda), else compiled here from
# GRAFT_FAISS_SOURCE_DIR/c_api (Debian ships the headers but not the library), which must then be
# the source of the same FAISS version.
if(GRAFT_FAISS_ROOT)
  find_library(GRAFT_FAISS_LIB faiss PATHS "${GRAFT_FAISS_ROOT}/usr/lib/x86_64-linux-gnu"
               NO_DEFAULT_PATH REQUIRED)
  # GRAFT_BLAS_LIBRARIES names BLAS+LAPACK by hand where no development symlinks exist
  # (e.g. only libopenblas.so.0 on the GPU machine).
  set(GRAFT_BLAS_LIBRARIES "" CACHE STRING "BLAS and LAPACK libraries for libfaiss.a")
  if(GRAFT_BLAS_LIBRARIES)
    set(_blas ${GRAFT_BLAS_LIBRARIES})
  else()
    find_package(BLAS REQUIRED)
    find_package(LAPACK REQUIRED)
    set(_blas ${LAPACK_LIBRARIES} ${BLAS_LIBRARIES})
  endif()
  add_library(faiss STATIC IMPORTED GLOBAL)
  set_target_properties(faiss PROPERTIES
    IMPORTED_LOCATION "${GRAFT_FAISS_LIB}"
    INTERFACE_INCLUDE_DIRECTORIES "${GRAFT_FAISS_ROOT}/usr/include"
    INTERFACE_LINK_LIBRARIES "OpenMP::OpenMP_CXX;${_blas}")
  set(_faiss_inc "${GRAFT_FAISS_ROOT}/usr/include")
  set(GRAFT_FAISS_VERSION 1.7.3)  # the .deb the GPU machine unpacks
else()
  find_package(faiss CONFIG REQUIRED)
  get_target_property(_faiss_inc faiss INTERFACE_INCLUDE_DIRECTORIES)
  set(GRAFT_FAISS_VERSION ${faiss_VERSION})
endif()
set(GRAFT_BUNDLED_FAISS_C OFF)
# A FAISS built with its GPU part (its headers say so): the benchmarks take their FAISS GPU peers
# from it (bench/CMakeLists.txt).
set(GRAFT_FAISS_HAS_GPU OFF)
foreach(_inc IN LISTS _faiss_inc)
  if(EXISTS "${_inc}/faiss/gpu/GpuIndexFlat.h")
    set(GRAFT_FAISS_HAS_GPU ON)
  endif()
endforeach()
string(REGEX MATCH "^[0-9]+\\.[0-9]+\\.[0-9]+" GRAFT_FAISS_VERSION "${GRAFT_FAISS_VERSION}")
if(NOT GRAFT_FAISS_VERSION)
  message(FATAL_ERROR "graft: the FAISS package found states no version (faiss_VERSION)")
endif()
message(STATUS "graft: FAISS ${GRAFT_FAISS_VERSION} (${_faiss_inc})")
string(REPLACE "." ";" _v "${GRAFT_FAISS_VERSION}")
list(GET _v 0 _major)
list(GET _v 1 _minor)
list(GET _v 2 _patch)
math(EXPR GRAFT_FAISS_VERSION_NUMBER "${_major} * 10000 + ${_minor} * 100 + ${_patch}")
# Does this FAISS say its version at run time (faiss::get_version(): 1.15 does, 1.7.3 not)? graft's load
# check (graft::require_faiss_runtime) then compares it with the version built against.
include(CheckCXXSourceCompiles)
set(CMAKE_REQUIRED_INCLUDES ${_faiss_inc})
set(CMAKE_REQUIRED_QUIET ON)
check_cxx_source_compiles("#include <faiss/utils/utils.h>
int main() { return faiss::get_version().empty(); }" GRAFT_FAISS_HAS_GET_VERSION)
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_QUIET)

# The version of the FAISS source tree in GRAFT_FAISS_SOURCE_DIR (its faiss/Index.h), which
# serves the bundled C API and the Python package's SWIG interface; both must come from the FAISS
# that is linked.
set(GRAFT_FAISS_SOURCE_VERSION "")
if(EXISTS "${GRAFT_FAISS_SOURCE_DIR}/faiss/Index.h")
  file(STRINGS "${GRAFT_FAISS_SOURCE_DIR}/faiss/Index.h" _v REGEX "#define FAISS_VERSION_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE "[^;]*FAISS_VERSION_[A-Z]+ ([0-9]+)" "\\1" _v "${_v}")
  string(REPLACE ";" "." GRAFT_FAISS_SOURCE_VERSION "${_v}")
endif()

# How graft's libraries get FAISS's code. Debian's libfaiss is a static archive (built PIC), and
# a linker pulls archive members only for a program's own undefined symbols, never for a shared
# library's. So a shared graft build puts the whole archive into one library, the bundled C API
# (libgraft_faiss_capi.so), which exports it: libgraft_faiss links that, and a program gets FAISS
# from there. A program (C++) that also links libfaiss.a itself still has one FAISS at run time:
# its own definitions interpose on the library's (ELF default visibility). A static graft build
# leaves FAISS to the program's link; a shared libfaiss (conda, a source build) is linked as is.
get_target_property(_faiss_type faiss TYPE)
# A shared libfaiss outside the system's folders (a source build in a prefix): graft's installed
# libraries and programs find it where graft found it.
set(GRAFT_FAISS_LIBDIR "")
if(_faiss_type STREQUAL "SHARED_LIBRARY")
  get_target_property(_loc faiss LOCATION)
  get_filename_component(_dir "${_loc}" DIRECTORY)
  if(NOT _dir IN_LIST CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES)
    set(GRAFT_FAISS_LIBDIR "${_dir}")
    list(APPEND CMAKE_INSTALL_RPATH "${_dir}")
  endif()
endif()
set(GRAFT_FAISS_EMBED OFF)
if(BUILD_SHARED_LIBS AND _faiss_type STREQUAL "STATIC_LIBRARY")
  set(GRAFT_FAISS_EMBED ON)
endif()
# graft_use_faiss(target [EMBED]): compile against FAISS; EMBED marks the library that holds it.
function(graft_use_faiss target)
  target_include_directories(${target} PRIVATE $<TARGET_PROPERTY:faiss,INTERFACE_INCLUDE_DIRECTORIES>)
  if(GRAFT_FAISS_EMBED)
    if(ARGV1 STREQUAL "EMBED")
      target_link_libraries(${target} PRIVATE $<LINK_LIBRARY:WHOLE_ARCHIVE,faiss>)
    endif()
  elseif(_faiss_type STREQUAL "STATIC_LIBRARY")
    target_link_libraries(${target} INTERFACE faiss)
  else()
    target_link_libraries(${target} PUBLIC faiss)
  endif()
endfunction()

if(NOT TARGET faiss_c)
  find_library(GRAFT_FAISS_C_LIB faiss_c)
endif()
if(TARGET faiss_c)
  # FAISS's own package made it (FAISS >= 1.8 built with its C API): linked as it is, not installed
  # by graft, no second copy. A static one goes into programs, not into a shared graft library.
  get_target_property(_faiss_c_type faiss_c TYPE)
  message(STATUS "graft: using FAISS's own faiss_c (${_faiss_c_type}) from ${faiss_DIR}")
  if(BUILD_SHARED_LIBS AND _faiss_c_type STREQUAL "STATIC_LIBRARY")
    message(FATAL_ERROR "graft: FAISS ${GRAFT_FAISS_VERSION} at ${faiss_DIR} has a static libfaiss_c, which "
                        "a shared graft library cannot hold: build FAISS with -DBUILD_SHARED_LIBS=ON "
                        "(scripts/setup.sh GRAFT_FAISS=1.15 does), or graft with -DBUILD_SHARED_LIBS=OFF")
  endif()
  set(GRAFT_FAISS_EMBED OFF)
  set(GRAFT_FAISS_C_SOURCE package)
elseif(GRAFT_FAISS_C_LIB AND NOT GRAFT_FAISS_ROOT)
  message(STATUS "graft: using installed ${GRAFT_FAISS_C_LIB}")
  add_library(faiss_c UNKNOWN IMPORTED GLOBAL)
  set_target_properties(faiss_c PROPERTIES IMPORTED_LOCATION "${GRAFT_FAISS_C_LIB}"
                        INTERFACE_LINK_LIBRARIES faiss)
  set(GRAFT_FAISS_EMBED OFF)  # that library brings its FAISS
  set(GRAFT_FAISS_C_SOURCE library)
else()
  set(_capi "${GRAFT_FAISS_SOURCE_DIR}/c_api")
  if(NOT EXISTS "${_capi}/Index_c.cpp")
    message(FATAL_ERROR "FAISS C API sources not found in ${_capi}: run scripts/setup.sh "
                        "(it fetches them with apt-get source faiss) or set GRAFT_FAISS_SOURCE_DIR")
  endif()
  if(NOT GRAFT_FAISS_SOURCE_VERSION STREQUAL GRAFT_FAISS_VERSION)
    message(FATAL_ERROR "graft: FAISS's C API would be compiled from FAISS ${GRAFT_FAISS_SOURCE_VERSION} "
                        "(${GRAFT_FAISS_SOURCE_DIR}) against FAISS ${GRAFT_FAISS_VERSION} (${_faiss_inc}): "
                        "set GRAFT_FAISS_SOURCE_DIR to the source of FAISS ${GRAFT_FAISS_VERSION}, or use a "
                        "FAISS built with its C API (FAISS_ENABLE_C_API=ON)")
  endif()
  # Every CPU source of the C API (its gpu/ folder left out), as FAISS's c_api/CMakeLists.txt lists them.
  file(GLOB _capi_src "${_capi}/*.cpp" "${_capi}/impl/*.cpp" "${_capi}/utils/*.cpp")
  # Installed as libgraft_faiss_capi (CMake target graft::faiss_capi), a name of graft's own, so
  # that it can never replace or be replaced by a libfaiss_c the user installs later; its SONAME
  # carries FAISS's version, since the C API has no ABI promise across FAISS versions.
  add_library(faiss_c ${_capi_src})
  set_target_properties(faiss_c PROPERTIES OUTPUT_NAME graft_faiss_capi EXPORT_NAME faiss_capi
                                           VERSION ${GRAFT_FAISS_VERSION} SOVERSION ${GRAFT_FAISS_VERSION})
  graft_use_faiss(faiss_c EMBED)
  target_compile_options(faiss_c PRIVATE -w)
  # Users include <faiss/c_api/Index_c.h>; the installed headers are used when present so that
  # tests see what a user sees.
  target_include_directories(faiss_c PUBLIC ${_faiss_inc})
  set(GRAFT_BUNDLED_FAISS_C ON)
  set(GRAFT_FAISS_C_SOURCE bundled)
  message(STATUS "graft: compiling faiss_c from ${_capi}")
endif()
