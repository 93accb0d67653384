# Helpers that keep every lib/ and test/ CMakeLists.txt short and uniform.
#
# dra_library(<name> SRCS <files> [DEPS <targets>])
#   A static library dra_<name>; includes are spelled from the repository root ("lib/common/x.h").
# dra_test(<name> SRCS <files> [DEPS <targets>] [LABELS <labels>] [TIMEOUT <s>])
#   A GoogleTest executable; every TEST is its own CTest test, labelled "unit" unless LABELS says
#   otherwise (integration tests carry "integration" and need the local cluster).

function(dra_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(dra_${name} STATIC ${ARG_SRCS})
  target_include_directories(dra_${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(dra_${name} PUBLIC ${ARG_DEPS})
endfunction()

function(dra_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${name} ${ARG_SRCS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  # Tests find scripts and fixtures of the source tree through this (test/support/cluster_env.h).
  target_compile_definitions(${name} PRIVATE DRA_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                            DRA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(serial FALSE)
  if("integration" IN_LIST ARG_LABELS OR "e2e" IN_LIST ARG_LABELS)
    set(serial TRUE)  # they share the one local cluster
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial})
endfunction()
