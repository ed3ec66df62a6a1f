# Validation and planning unit tests of the operator library core, one
# executable per operator stem. Included from tests/core/CMakeLists.txt; needs
# only tensorop_core (no kernels) and the shared test support.
include(GoogleTest)

function(tensorop_validation_plan_test name source)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE tensorop_core tensorop_test_support
                                        GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${TENSOROP_WARNINGS})
  # `ctest -L validation_plan` runs just these.
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS validation_plan)
endfunction()

foreach(stem tensor limits slice strided_slice split scatter_elements)
  tensorop_validation_plan_test(validation_${stem}_test
                                ${CMAKE_CURRENT_LIST_DIR}/validation/${stem}_test.cc)
endforeach()

foreach(stem strided_copy byte_range slice strided_slice split scatter_elements operator)
  tensorop_validation_plan_test(plan_${stem}_test
                                ${CMAKE_CURRENT_LIST_DIR}/plan/${stem}_test.cc)
endforeach()

# The dtypes in core/dtype.h.
tensorop_validation_plan_test(dtype_test ${CMAKE_CURRENT_LIST_DIR}/dtype_test.cc)

# The per-operator descriptions in core/operator_info.h.
tensorop_validation_plan_test(operator_info_test ${CMAKE_CURRENT_LIST_DIR}/operator_info_test.cc)
