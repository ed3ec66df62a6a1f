# Embeds an OpenCL C source file as a C++ string constant, so the .cl files stay
# real, standalone OpenCL C while the binary carries them.
#   cmake -DINPUT=x.cl -DOUTPUT=x_cl.cc -DSYMBOL=kXClSource -P embed.cmake
file(READ "${INPUT}" content)
file(WRITE "${OUTPUT}"
  "// Generated from ${INPUT} by embed.cmake. Do not edit.\n"
  "#include \"kernels/opencl/sources.h\"\n"
  "namespace tensorop::opencl_backend {\n"
  "extern const char ${SYMBOL}[] = R\"tensorop_cl(${content})tensorop_cl\";\n"
  "}  // namespace tensorop::opencl_backend\n")
