// The translation unit that compiles the precompiled headers of
// cmake/precompiled_headers.cmake; it has nothing of its own.
