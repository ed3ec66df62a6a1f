# Flags that depend on whether a target is a test (links GoogleTest):
#   - the tests' one precompiled header (below), shared by every test target that
#     uses gRPC;
#   - the tests' lighter optimisation (below);
#   - libFuzzer's coverage (TENSOROP_FUZZ) in everything but the tests: the fuzz
#     targets need it in the code they drive, and the tests, the most of the ASan
#     tree, compiled a third faster without it.
#
# In RelWithDebInfo builds (release, TSan) a test's own code compiles at -O1 -g1:
# a unity batch of server tests took 43 s so against 76 s at -O2 -g, and tests
# were three fifths of the release build. The code under test (core, kernels,
# server, client) keeps the build's flags, so the tests still run the optimised
# code that ships; -g1 keeps the line tables that backtraces and sanitizer
# reports need.
#
# Most of a test's compile time here is the parse of the same headers: the
# standard library, Abseil, gRPC, protobuf, the generated tensorop.pb.h,
# GoogleTest and GoogleMock (a fifth of a unity batch of server tests). One
# compiled header, reused by every test target that links gRPC (CMake's
# REUSE_FROM), parses them once per build. The libraries gain nothing measurable
# (tensord and tensorctl built 313 s without, 315 s with), so they keep parsing
# what they include, and the container image, which builds no tests, has none.
#
# GCC only, so the release and TSan builds (the ASan build is clang's, which parses
# these headers fast enough without): GCC accepts one compiled header across
# targets whose macros differ where the header does not look (clang does not);
# -Winvalid-pch (added by CMake, an error under TENSOROP_WERROR) says when a
# header was refused. Only tests use it,
# which scripts/tidy.py does not check (clang would take GCC's .gch for its own).
option(TENSOROP_PCH "Share a precompiled header across the test targets (GCC)" ON)

set(_tensorop_pch_headers
  <algorithm> <atomic> <chrono> <condition_variable> <cstdint> <functional> <map>
  <memory> <mutex> <optional> <span> <string> <string_view> <thread> <utility> <vector>
  <grpcpp/grpcpp.h>
  <absl/status/status.h> <absl/status/statusor.h> <absl/strings/str_cat.h>
  <absl/strings/str_format.h>
  <tensorop/v1/tensorop.pb.h> <tensorop/v1/tensorop.grpc.pb.h>
  <gmock/gmock.h> <gtest/gtest.h>)

# After the build's own flags, so these win (the header's target takes them too:
# a compiled header is used only with the flags it was compiled with).
set(_tensorop_test_flags $<$<CONFIG:RelWithDebInfo>:-O1$<SEMICOLON>-g1>)

# Adds the header target; call before the targets that reuse it are used.
function(tensorop_add_precompiled_headers)
  if(NOT TENSOROP_PCH OR NOT TENSOROP_BUILD_TESTS OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  add_library(tensorop_pch_test OBJECT "${PROJECT_SOURCE_DIR}/cmake/precompiled_headers.cc")
  target_link_libraries(tensorop_pch_test PRIVATE
    tensorop_proto gRPC::grpc++ absl::status absl::statusor absl::strings absl::str_format
    GTest::gmock)
  target_precompile_headers(tensorop_pch_test PRIVATE ${_tensorop_pch_headers})
  target_compile_options(tensorop_pch_test PRIVATE ${_tensorop_test_flags})
  set_target_properties(tensorop_pch_test PROPERTIES UNITY_BUILD OFF)
endfunction()

# Whether `target` links `wanted` (a regular expression over link items), directly
# or through tensorop's own targets. Each answer is remembered (a global
# property per target and expression): the rooms link one another along many
# paths, and walking them afresh for every target took minutes.
function(_tensorop_links target wanted out)
  string(MD5 key "${wanted}")
  get_property(known GLOBAL PROPERTY _tensorop_links_${target}_${key} SET)
  if(known)
    get_property(answer GLOBAL PROPERTY _tensorop_links_${target}_${key})
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  set(answer FALSE)
  set(items)
  foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(listed ${target} ${property})
    if(listed)
      list(APPEND items ${listed})
    endif()
  endforeach()
  foreach(item IN LISTS items)
    if(item MATCHES "${wanted}")
      set(answer TRUE)
      break()
    endif()
    if(TARGET "${item}" AND item MATCHES "^tensorop_")
      _tensorop_links(${item} "${wanted}" found)
      if(found)
        set(answer TRUE)
        break()
      endif()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY _tensorop_links_${target}_${key} ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

function(_tensorop_targets_in dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _tensorop_targets_in("${subdir}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Every test target (one that links GoogleTest) takes the test flags; those that
# link gRPC reuse the header. A target without gRPC would refuse it (it is
# compiled without -pthread) and gains little. Every other target takes the
# fuzzers' coverage in a fuzz build.
function(tensorop_set_target_flags)
  _tensorop_targets_in("${PROJECT_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|OBJECT_LIBRARY)$"
       OR target MATCHES "^tensorop_pch_")
      continue()
    endif()
    _tensorop_links(${target} "^GTest::" uses_gtest)
    if(NOT uses_gtest)
      if(TENSOROP_FUZZ)
        target_compile_options(${target} PRIVATE -fsanitize=fuzzer-no-link)
      endif()
      continue()
    endif()
    target_compile_options(${target} PRIVATE ${_tensorop_test_flags})
    _tensorop_links(${target} "^gRPC::grpc\\+\\+" uses_grpc)
    if(uses_grpc AND TARGET tensorop_pch_test)
      target_precompile_headers(${target} REUSE_FROM tensorop_pch_test)
    endif()
  endforeach()
endfunction()
