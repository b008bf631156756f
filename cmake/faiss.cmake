# Provides the targets `faiss` (libfaiss, CPU) and `faiss_c` (FAISS's C API), and
# graft_use_faiss(target) for graft's libraries that call FAISS.
#
# FAISS: the system's (Debian libfaiss-dev, CMake config), or an unpacked .deb under
# GRAFT_FAISS_ROOT (the GPU machine has no FAISS: the .deb travels with the call).
# faiss_c: an installed libfaiss_c (conda, source build) when one is found, else compiled from
# GRAFT_FAISS_SOURCE_DIR/c_api against libfaiss.a (Debian ships the headers but not the library).

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

# How graft's libraries get FAISS's code. Debian's libfaiss is a static archive (built PIC), and
# a linker pulls archive members only for a program's own undefined symbols, never for a shared
# library's. So a shared graft build puts the whole archive into one library, the bundled C API
# (libgraft_faiss_capi.so), which exports it: libgraft_faiss links that, and a program gets FAISS
# from there. A program (C++) that also links libfaiss.a itself still has one FAISS at run time:
# its own definitions interpose on the library's (ELF default visibility). A static graft build
# leaves FAISS to the program's link; a shared libfaiss (conda, a source build) is linked as is.
get_target_property(_faiss_type faiss TYPE)
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

find_library(GRAFT_FAISS_C_LIB faiss_c)
if(GRAFT_FAISS_C_LIB AND NOT GRAFT_FAISS_ROOT)
  message(STATUS "graft: using installed ${GRAFT_FAISS_C_LIB}")
  add_library(faiss_c UNKNOWN IMPORTED GLOBAL)
  set_target_properties(faiss_c PROPERTIES IMPORTED_LOCATION "${GRAFT_FAISS_C_LIB}"
                        INTERFACE_LINK_LIBRARIES faiss)
  set(GRAFT_FAISS_EMBED OFF)  # that library brings its FAISS
else()
  set(_capi "${GRAFT_FAISS_SOURCE_DIR}/c_api")
  if(NOT EXISTS "${_capi}/Index_c.cpp")
    message(FATAL_ERROR "FAISS C API sources not found in ${_capi}: run scripts/setup.sh "
                        "(it fetches them with apt-get source faiss) or set GRAFT_FAISS_SOURCE_DIR")
  endif()
  set(_capi_src
    AutoTune_c.cpp Clustering_c.cpp IndexFlat_c.cpp IndexIVFFlat_c.cpp IndexIVF_c.cpp
    IndexLSH_c.cpp IndexPreTransform_c.cpp VectorTransform_c.cpp IndexShards_c.cpp
    IndexReplicas_c.cpp Index_c.cpp IndexBinary_c.cpp IndexScalarQuantizer_c.cpp
    MetaIndexes_c.cpp clone_index_c.cpp error_impl.cpp index_factory_c.cpp index_io_c.cpp
    impl/AuxIndexStructures_c.cpp utils/distances_c.cpp)
  list(TRANSFORM _capi_src PREPEND "${_capi}/")
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
  message(STATUS "graft: compiling faiss_c from ${_capi}")
endif()
