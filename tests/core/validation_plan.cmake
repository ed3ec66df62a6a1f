# Validation and planning unit tests of the operator library core, with the
# dtypes and the per-operator descriptions: one executable (core_unit_tests),
# one source per operator stem, compiled in unity batches. One executable, not
# one per file: each file alone paid the parse of gtest and absl again and a
# link, about two thirds of their build time, in every build flavour. Included
# from tests/core/CMakeLists.txt; needs tensorop_core, oneTBB's kernels (the
# output bands run on them) and the shared test support.
include(GoogleTest)

set(core_unit_sources
    ${CMAKE_CURRENT_LIST_DIR}/dtype_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/float_rounding_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/element_text_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/operator_info_test.cc)
foreach(stem tensor limits slice strided_slice split scatter_elements transpose reshape expand tile
             gather gather_elements join pad)
  list(APPEND core_unit_sources ${CMAKE_CURRENT_LIST_DIR}/validation/${stem}_test.cc)
endforeach()
foreach(stem strided_copy byte_range slice strided_slice split scatter_elements reshape operator
             output_bands source_pieces compose_windows pad)
  list(APPEND core_unit_sources ${CMAKE_CURRENT_LIST_DIR}/plan/${stem}_test.cc)
endforeach()
add_executable(core_unit_tests ${core_unit_sources})
target_link_libraries(core_unit_tests PRIVATE tensorop_core tensorop_kernels_tbb
                                              tensorop_test_support GTest::gtest_main)
target_compile_options(core_unit_tests PRIVATE ${TENSOROP_WARNINGS})
# `ctest -L validation_plan` runs just these.
gtest_discover_tests(core_unit_tests DISCOVERY_TIMEOUT 60 PROPERTIES LABELS validation_plan)
