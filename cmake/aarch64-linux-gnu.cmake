# aarch64-linux-gnu.cmake — the toolchain of the aarch64 cross build: Debian's cross compilers and
# the arm64 builds of the libraries ranksnap links (multiarch), as tests/run-suite.sh builds it:
#
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#     -DRANKSNAP_CUDA_HEADERS_ONLY=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
#
# Its programs run under qemu-user (tests/emulated.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
# the arm64 packages' libraries and headers; the build machine's programs (python3, sh, nvcc)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
