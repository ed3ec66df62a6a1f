# Read by cpack when it runs (CPACK_PROJECT_CONFIG_FILE): the package version
# and file name from cmake/version.cmake.
execute_process(
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${CPACK_TENSOROP_SOURCE_DIR}
          "-DTENSOROP_VERSION_OVERRIDE=${CPACK_TENSOROP_VERSION_OVERRIDE}"
          -P ${CPACK_TENSOROP_SOURCE_DIR}/cmake/version.cmake
  OUTPUT_VARIABLE tensorop_version OUTPUT_STRIP_TRAILING_WHITESPACE)
set(CPACK_PACKAGE_VERSION "${tensorop_version}")
set(CPACK_DEBIAN_PACKAGE_VERSION "${tensorop_version}")
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE architecture
                OUTPUT_STRIP_TRAILING_WHITESPACE)
set(CPACK_DEBIAN_FILE_NAME "tensord_${tensorop_version}_${architecture}.deb")
