// The translation unit that compiles the precompiled headers of
// cmake/target_flags.cmake; it has nothing of its own.
