# cpack -G DEB (in the build directory): tensord_<version>_amd64.deb holding
# tensord and tensorctl, the systemd unit, /etc/tensord/tensord.flags (a
# conffile) and a postinst making the tensord system user. Its dependencies
# come from the Debian packages the binaries link (dpkg-shlibdeps).
# tests/install/deb_test.sh checks it; scripts/fresh-debian-test.sh --deb
# installs it in a fresh Debian root.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/tensord.service
        DESTINATION lib/systemd/system COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/tensord.flags
        DESTINATION /etc/tensord COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/debian/README.md
        DESTINATION share/doc/tensord COMPONENT runtime)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tensord)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "tensorop maintainers <tensorop@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "tensor operators (Slice, StridedSlice, Split, ScatterElements) over gRPC")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # the debug info stays in the build tree
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "pocl-opencl-icd")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_SOURCE_DIR}/deploy/debian/postinst
    ${PROJECT_SOURCE_DIR}/deploy/debian/prerm
    ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The version is the one the binaries were built with, read when cpack runs
# (CPACK_* variables are the ones cpack sees).
set(CPACK_TENSOROP_VERSION_CC ${CMAKE_BINARY_DIR}/generated/tensorop_version.cc)  # core/CMakeLists.txt
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/package_version.cmake)
include(CPack)
