# libFuzzer builds: the `check` preset (clang, -DDRA_FUZZ=ON, build/check) builds them with the
# rest of the tree; hack/fuzz.sh runs each fuzzer for a bounded time.
#
# With DRA_FUZZ every target of the tree is compiled with coverage instrumentation
# (-fsanitize=fuzzer-no-link) and ASan + UBSan, so a fuzzer's coverage counts the edges of the
# libraries under test, not only those of its entry point; UBSan findings abort (a crash is what
# libFuzzer reports). Only the fuzzer executables link the libFuzzer runtime (-fsanitize=fuzzer).
#
# dra_fuzzer(<name> SRCS <files> [DEPS <targets>] [DEFS <definitions>])
#   One libFuzzer binary (its SRCS define LLVMFuzzerTestOneInput); nothing without DRA_FUZZ. Every
#   fuzzer is a dependency of the `fuzzers` target.

option(DRA_FUZZ "Build the libFuzzer targets (needs clang and its libFuzzer runtime)" OFF)

if(DRA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "DRA_FUZZ needs clang (cmake --preset check); CMAKE_CXX_COMPILER is "
                        "${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  add_custom_target(fuzzers)
endif()

function(dra_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;DEFS" ${ARGN})
  if(NOT DRA_FUZZ)
    return()
  endif()
  add_executable(${name} ${ARG_SRCS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE ${ARG_DEFS})
  # The static sanitizer runtime: a fuzzer loads no instrumented library of its own, and libFuzzer
  # puts libstdc++ ahead of a shared runtime, which ASan refuses (CMakeLists.txt, -shared-libsan).
  target_link_options(${name} PRIVATE -fsanitize=fuzzer -static-libsan)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  add_dependencies(fuzzers ${name})
endfunction()
