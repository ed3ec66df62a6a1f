# cmake --install: tensord and tensorctl (component runtime), and the C++ client
# for other projects (component dev): static libraries, headers under
# include/tensorop/, tensoropConfig.cmake (find_package(tensorop CONFIG)) and
# tensorop.pc. tests/install/install_test.sh proves both against a real tensord.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tensord tensorctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

set_target_properties(tensorop_client PROPERTIES EXPORT_NAME client)
set_target_properties(tensorop_proto PROPERTIES EXPORT_NAME proto)
install(TARGETS tensorop_client tensorop_proto grpc_health_proto
        EXPORT tensoropTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tensorop)
# Headers keep their include paths ("client/client.h", "tensorop/v1/...") below
# include/tensorop/, so nothing generic lands in include/ itself.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/client/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tensorop/client COMPONENT dev
        FILES_MATCHING PATTERN "*.h" PATTERN "python" EXCLUDE)
install(DIRECTORY ${PROJECT_BINARY_DIR}/proto/tensorop ${PROJECT_BINARY_DIR}/proto/grpc
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tensorop COMPONENT dev
        FILES_MATCHING PATTERN "*.pb.h")
install(EXPORT tensoropTargets NAMESPACE tensorop::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tensorop COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tensoropConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tensoropConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tensorop)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tensoropConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tensoropConfig.cmake
              ${PROJECT_BINARY_DIR}/tensoropConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tensorop COMPONENT dev)
set(TENSOROP_PC_VERSION ${PROJECT_VERSION})
# From <libdir>/pkgconfig up to the prefix ("../.." for lib, "../../.." for a
# multiarch lib/x86_64-linux-gnu).
file(RELATIVE_PATH TENSOROP_PC_UP /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${PROJECT_SOURCE_DIR}/cmake/tensorop.pc.in ${PROJECT_BINARY_DIR}/tensorop.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tensorop.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)
