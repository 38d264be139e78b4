# cmake/toolchains/aarch64-linux-gnu.cmake -- cross-compile nnlens for 64-bit ARM Linux (Cortex-A,
# NEON), Debian's g++-aarch64-linux-gnu; run the results under qemu-aarch64 (Debian qemu-user).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake
# The header-only dependencies (xtensor, xtl, xsimd, Boost, doctest) are architecture-independent:
# they are read from the build machine's /usr/include, searched after the cross compiler's own
# headers (-idirafter), so the ARM C library's headers always win.  Binaries are linked statically
# so that qemu-aarch64 runs them without an ARM root file system.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CXX_FLAGS_INIT "-idirafter /usr/include")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
# find_package looks in the build machine's config folders too (header-only packages only: Debian
# puts xtensor's and xsimd's under the build machine's multiarch folder).
list(APPEND CMAKE_PREFIX_PATH /usr/lib/x86_64-linux-gnu/cmake /usr/share/cmake /usr/lib/cmake)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
