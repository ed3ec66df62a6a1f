# Run by cmake --install (install(CODE) in cmake/install.cmake sets
# TENSOROP_SOURCE_DIR, TENSOROP_BINARY_DIR and TENSOROP_INCLUDEDIR): installs
# the C++ client's headers and the generated proto headers under
# <includedir>/tensorop/, so that a consumer's only include path is
# <includedir> and every path it names starts with tensorop/:
#   client/*.h                     -> tensorop/client/*.h
#   tensorop/v1/*.pb.h (generated) -> tensorop/v1/*.pb.h
#   grpc/health/v1/*.pb.h (gen.)   -> tensorop/grpc/health/v1/*.pb.h
# In the tree the headers include each other by their tree paths
# ("client/channel.h", "grpc/health/v1/health.pb.h"); the installed copies are
# rewritten to <tensorop/client/channel.h>, <tensorop/grpc/health/v1/...>, so
# that no generic client/ or grpc/health/ path is looked up on a consumer's
# include path (where its own client/ folder may be). An installed header that
# would still include a path of the tree's layout stops the install.
cmake_policy(VERSION 3.25)  # this include()'s own policy scope: IN_LIST and the rest
set(stage "${TENSOROP_BINARY_DIR}/installed-include")
file(REMOVE_RECURSE "${stage}")

# Installed path below include/ -> the file it comes from.
set(installed)
file(GLOB client_headers "${TENSOROP_SOURCE_DIR}/client/*.h")
foreach(header IN LISTS client_headers)
  get_filename_component(name "${header}" NAME)
  list(APPEND installed "tensorop/client/${name}")
  set("source_tensorop/client/${name}" "${header}")
endforeach()
file(GLOB_RECURSE proto_headers RELATIVE "${TENSOROP_BINARY_DIR}/proto"
     "${TENSOROP_BINARY_DIR}/proto/tensorop/*.pb.h" "${TENSOROP_BINARY_DIR}/proto/grpc/*.pb.h")
foreach(relative IN LISTS proto_headers)
  if(relative MATCHES "^tensorop/")
    set(path "${relative}")
  else()
    set(path "tensorop/${relative}")
  endif()
  list(APPEND installed "${path}")
  set("source_${path}" "${TENSOROP_BINARY_DIR}/proto/${relative}")
endforeach()
if(NOT "tensorop/client/client.h" IN_LIST installed OR
   NOT "tensorop/v1/tensorop.grpc.pb.h" IN_LIST installed OR
   NOT "tensorop/grpc/health/v1/health.grpc.pb.h" IN_LIST installed)
  message(FATAL_ERROR "tensorop headers missing (is the build complete?): ${installed}")
endif()

foreach(path IN LISTS installed)
  file(READ "${source_${path}}" text)
  string(REGEX REPLACE "#include \"(client|grpc/health)/([^\"]+)\""
         "#include <tensorop/\\1/\\2>" text "${text}")
  string(REGEX REPLACE "#include \"(tensorop/[^\"]+)\"" "#include <\\1>" text "${text}")
  # What is left must not name the tree's own layout.
  string(REGEX MATCH "#include [\"<](client|core|server|kernels|proto|generated|tests|grpc/health)/[^\">]*[\">]"
         leak "${text}")
  if(leak)
    message(FATAL_ERROR "${source_${path}}: '${leak}' names the tree's layout, which is not "
                        "installed: an installed header may include the client's headers, the "
                        "generated protos and its dependencies' headers only")
  endif()
  file(WRITE "${stage}/${path}" "${text}")
endforeach()

if(IS_ABSOLUTE "${TENSOROP_INCLUDEDIR}")
  set(destination "${TENSOROP_INCLUDEDIR}")
else()
  set(destination "${CMAKE_INSTALL_PREFIX}/${TENSOROP_INCLUDEDIR}")
endif()
# file(INSTALL) honours DESTDIR and records each file in install_manifest.txt.
file(INSTALL "${stage}/tensorop" DESTINATION "${destination}")
