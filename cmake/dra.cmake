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
  # dra_build_paths: where tests find the source and build trees (test/support/build_paths.h).
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} dra_build_paths GTest::gmock GTest::gtest_main)
  set(serial FALSE)
  if("integration" IN_LIST ARG_LABELS OR "e2e" IN_LIST ARG_LABELS)
    set(serial TRUE)  # they share the one local cluster
    add_dependencies(cluster-deps ${name})
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} RUN_SERIAL ${serial})
endfunction()

# dra_prefer_static_imports()
#   DRA_STATIC_DEPS: every imported library target of this directory (absl, gRPC, protobuf,
#   yaml-cpp, re2, c-ares, upb, zlib...) is pointed at the static archive installed beside its
#   shared object, so that the binaries map a handful of shared libraries instead of ~80 (their
#   file-backed pages count in RSS). The C and C++ runtimes and OpenSSL stay shared: the system
#   updates them (OpenSSL security fixes) and every process shares their pages.
set(DRA_KEEP_SHARED ssl crypto c m dl pthread rt stdc++ gcc_s atomic)

# Sets `out` to the static archive for shared library `path` (".../libfoo.so[.N]"), or "" when
# there is none or the library must stay shared.
function(dra_static_archive_for path out)
  set(${out} "" PARENT_SCOPE)
  if(NOT path MATCHES "^(.*/)?lib([^/]+)\\.so(\\.[0-9.]+)?$")
    return()
  endif()
  set(name ${CMAKE_MATCH_2})
  if(name IN_LIST DRA_KEEP_SHARED)
    return()
  endif()
  string(REGEX REPLACE "\\.so(\\.[0-9.]+)?$" ".a" archive "${path}")
  if(EXISTS "${archive}")
    set(${out} "${archive}" PARENT_SCOPE)
  endif()
endfunction()

function(dra_prefer_static_imports)
  get_property(targets DIRECTORY PROPERTY IMPORTED_TARGETS)
  set(count 0)
  foreach(t IN LISTS targets)
    # Plain "-lfoo" and ".../libfoo.so" entries (pkg-config imports such as re2::re2).
    get_target_property(deps ${t} INTERFACE_LINK_LIBRARIES)
    if(deps)
      set(new_deps "")
      foreach(d IN LISTS deps)
        set(archive "")
        if(d MATCHES "^-l(.+)$")
          if(NOT CMAKE_MATCH_1 IN_LIST DRA_KEEP_SHARED AND
             EXISTS "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/lib${CMAKE_MATCH_1}.a")
            set(archive "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}/lib${CMAKE_MATCH_1}.a")
          endif()
        elseif(IS_ABSOLUTE "${d}")
          dra_static_archive_for("${d}" archive)
        endif()
        if(archive)
          list(APPEND new_deps "${archive}")
          math(EXPR count "${count} + 1")
        else()
          list(APPEND new_deps "${d}")
        endif()
      endforeach()
      set_target_properties(${t} PROPERTIES INTERFACE_LINK_LIBRARIES "${new_deps}")
    endif()
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "SHARED_LIBRARY|UNKNOWN_LIBRARY")
      continue()
    endif()
    get_target_property(configs ${t} IMPORTED_CONFIGURATIONS)
    set(props IMPORTED_LOCATION)
    if(configs)
      foreach(c IN LISTS configs)
        list(APPEND props IMPORTED_LOCATION_${c})
      endforeach()
    endif()
    set(changed FALSE)
    foreach(p IN LISTS props)
      get_target_property(location ${t} ${p})
      if(location)
        dra_static_archive_for("${location}" archive)
        if(archive)
          set_target_properties(${t} PROPERTIES ${p} "${archive}")
          set(changed TRUE)
        endif()
      endif()
    endforeach()
    if(changed)
      # A static archive carries no soname and needs its own dependencies on the link line.
      set_target_properties(${t} PROPERTIES IMPORTED_NO_SONAME TRUE)
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
  message(STATUS "DRA_STATIC_DEPS: ${count} imported libraries linked from static archives")
endfunction()
