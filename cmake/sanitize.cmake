# The hardening tree (scripts/setup.sh builds it into build-sanitize/ with clang-14, CPU only):
#   GRAFT_SANITIZE=ON  every C/C++ object built and linked with ASan + UBSan (libfaiss.a and
#                      OpenBLAS stay uninstrumented: Debian's binaries);
#   GRAFT_FUZZ=ON      also the libFuzzer targets of tests/fuzz/ (needs clang).
# The main tree's CTest runs this tree's suites and fuzzers (tests/sanitize/), labels asan / fuzz.
option(GRAFT_SANITIZE "Build with -fsanitize=address,undefined" OFF)
option(GRAFT_FUZZ "Build the libFuzzer targets (clang)" OFF)

if(GRAFT_SANITIZE)
  # No recovery: a UBSan report fails the test instead of scrolling past.
  set(_graft_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_graft_san}>")
  add_link_options("$<$<LINK_LANGUAGE:C,CXX>:${_graft_san}>")
endif()
if(GRAFT_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GRAFT_FUZZ=ON needs clang (libFuzzer): CC=clang-14 CXX=clang++-14")
  endif()
  # Coverage instrumentation everywhere; the fuzz targets alone link libFuzzer's main.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
  # Fuzzing-only switches (the libFuzzer convention): see graft_fuzzing in plugin/io/io_stream.c.
  add_compile_definitions(FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
endif()
