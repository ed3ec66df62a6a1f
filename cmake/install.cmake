# cmake --install: tensord and tensorctl (component runtime), and the C++ client
# for other projects (component dev): static libraries, headers under
# include/tensorop/ (included as <tensorop/client/client.h>, with include/ the
# only include path), tensoropConfig.cmake (find_package(tensorop CONFIG)) and
# tensorop.pc. tests/install/install_test.sh proves both against a real tensord.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tensord tensorctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

set_target_properties(tensorop_client PROPERTIES EXPORT_NAME client)
set_target_properties(tensorop_proto PROPERTIES EXPORT_NAME proto)
set_target_properties(tensorop_float_rounding PROPERTIES EXPORT_NAME float_rounding)
install(TARGETS tensorop_client tensorop_proto tensorop_float_rounding grpc_health_proto
        EXPORT tensoropTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# Every header below include/tensorop/ (tensorop/client/, tensorop/v1/,
# tensorop/grpc/health/v1/), their includes of each other rewritten from the
# tree's paths ("client/channel.h") to <tensorop/client/channel.h>: a consumer's
# own client/ folder cannot shadow them, as with <grpcpp/...> and <absl/...>.
install(CODE "set(TENSOROP_SOURCE_DIR [[${PROJECT_SOURCE_DIR}]])
set(TENSOROP_BINARY_DIR [[${PROJECT_BINARY_DIR}]])
set(TENSOROP_INCLUDEDIR [[${CMAKE_INSTALL_INCLUDEDIR}]])
include([[${PROJECT_SOURCE_DIR}/cmake/install_headers.cmake]])" COMPONENT dev)
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
