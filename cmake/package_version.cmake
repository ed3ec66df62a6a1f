# Read by cpack when it runs (CPACK_PROJECT_CONFIG_FILE): the package version
# and file name are the version the binaries were built with (the generated
# tensorop_version.cc), not the tree's now.
file(STRINGS "${CPACK_TENSOROP_VERSION_CC}" version_line REGEX "return \"")
string(REGEX REPLACE ".*return \"([^\"]*)\".*" "\\1" tensorop_version "${version_line}")
set(CPACK_PACKAGE_VERSION "${tensorop_version}")
set(CPACK_DEBIAN_PACKAGE_VERSION "${tensorop_version}")
execute_process(COMMAND dpkg --print-architecture OUTPUT_VARIABLE architecture
                OUTPUT_STRIP_TRAILING_WHITESPACE)
set(CPACK_DEBIAN_FILE_NAME "tensord_${tensorop_version}_${architecture}.deb")
