# mpi.cmake — which MPIs the build knows: the families the MPI plugins are built for, and the
# MPI of the tests, the demo and ranksnap-collect.
#
# libranksnap.so needs no MPI. What needs mpi.h — the PMPI wrappers, joining the world, the
# point-to-point calls of the gather — is a plugin per MPI family, libranksnap-mpi-FAMILY.so
# (rank/mpi_plugin/, docs/ARCHITECTURE.md), compiled with that family's mpi.h and linked with no
# MPI library: Open MPI's and MPICH's ABIs differ (a communicator is a pointer in one, an int in
# the other), and one plugin of MPICH's ABI serves Intel MPI and MVAPICH too.
#
#   -DRANKSNAP_MPI=auto           (default) a plugin for every family whose mpi.h is found; the
#                                 tests' MPI is FindMPI's (the `mpicc` on PATH)
#   -DRANKSNAP_MPI=mpich          that family only, which must be found, and the tests' MPI too
#                                 (its mpicc.mpich and mpiexec.mpich where the names exist)
#   -DRANKSNAP_MPI="mpich;openmpi" both, the first one the tests'
#   -DRANKSNAP_MPI=none           no plugin: ranksnap never joins an MPI job
#
# A family's mpi.h: FindMPI's when it is that family, else pkg-config's module of it (ompi-c,
# mpich). Sets RS_MPI_FAMILIES (the plugins to build, each with RS_MPI_INCLUDES_<family>) and
# RS_TEST_MPI_FAMILY; rs_mpi_plugins() defines the plugin targets, once the library's are.
include(CheckSymbolExists)
set(RANKSNAP_MPI auto CACHE STRING
  "MPI families to build plugins for: auto, openmpi, mpich, a list (the first is the tests' MPI), or none")
set(RS_MPI_KNOWN openmpi mpich)
set(RS_MPI_PC_openmpi ompi-c)
set(RS_MPI_PC_mpich mpich)

string(TOLOWER "${RANKSNAP_MPI}" rs_mpi_want)
set(rs_mpi_required)
if(rs_mpi_want STREQUAL "auto")
  set(rs_mpi_try ${RS_MPI_KNOWN})
elseif(rs_mpi_want STREQUAL "none" OR rs_mpi_want STREQUAL "off")
  set(rs_mpi_try)
else()
  foreach(f ${rs_mpi_want})
    if(NOT f IN_LIST RS_MPI_KNOWN)
      message(FATAL_ERROR "RANKSNAP_MPI=${RANKSNAP_MPI}: '${f}' is no MPI family ranksnap knows "
        "(${RS_MPI_KNOWN}, or auto, or none)")
    endif()
  endforeach()
  set(rs_mpi_try ${rs_mpi_want})
  set(rs_mpi_required ${rs_mpi_want})
  # the tests' MPI: the first family's own compiler wrapper and launcher, where Debian's names are
  list(GET rs_mpi_required 0 rs_mpi_first)
  find_program(RS_MPICC_${rs_mpi_first} mpicc.${rs_mpi_first})
  find_program(RS_MPIEXEC_${rs_mpi_first} mpiexec.${rs_mpi_first})
  if(RS_MPICC_${rs_mpi_first} AND NOT MPI_C_COMPILER)
    set(MPI_C_COMPILER ${RS_MPICC_${rs_mpi_first}} CACHE FILEPATH "")
  endif()
  if(RS_MPIEXEC_${rs_mpi_first} AND NOT MPIEXEC_EXECUTABLE)
    set(MPIEXEC_EXECUTABLE ${RS_MPIEXEC_${rs_mpi_first}} CACHE FILEPATH "")
  endif()
endif()

set(RS_TEST_MPI_FAMILY "")
if(rs_mpi_try)
  find_package(MPI COMPONENTS C)
endif()
if(MPI_C_FOUND)
  set(CMAKE_REQUIRED_INCLUDES ${MPI_C_INCLUDE_DIRS})
  set(CMAKE_REQUIRED_QUIET ON)
  unset(RS_FINDMPI_IS_OPENMPI CACHE)
  unset(RS_FINDMPI_IS_MPICH CACHE)
  check_symbol_exists(OPEN_MPI mpi.h RS_FINDMPI_IS_OPENMPI)
  check_symbol_exists(MPICH_VERSION mpi.h RS_FINDMPI_IS_MPICH)
  unset(CMAKE_REQUIRED_INCLUDES)
  unset(CMAKE_REQUIRED_QUIET)
  if(RS_FINDMPI_IS_OPENMPI)
    set(RS_TEST_MPI_FAMILY openmpi)
  elseif(RS_FINDMPI_IS_MPICH)
    set(RS_TEST_MPI_FAMILY mpich)
  endif()
  if(rs_mpi_required)
    list(GET rs_mpi_required 0 rs_mpi_first)
    if(NOT RS_TEST_MPI_FAMILY STREQUAL rs_mpi_first)
      message(FATAL_ERROR "RANKSNAP_MPI=${RANKSNAP_MPI}: FindMPI found ${MPI_C_COMPILER}, which is "
        "not ${rs_mpi_first}; point MPI_C_COMPILER at ${rs_mpi_first}'s mpicc")
    endif()
  endif()
endif()

set(RS_MPI_FAMILIES)
foreach(f ${rs_mpi_try})
  set(RS_MPI_INCLUDES_${f})
  if(f STREQUAL RS_TEST_MPI_FAMILY)
    set(RS_MPI_INCLUDES_${f} ${MPI_C_INCLUDE_DIRS})
  elseif(PkgConfig_FOUND)
    pkg_check_modules(RS_MPI_PC_FOUND_${f} QUIET ${RS_MPI_PC_${f}})
    if(RS_MPI_PC_FOUND_${f}_FOUND)
      set(RS_MPI_INCLUDES_${f} ${RS_MPI_PC_FOUND_${f}_INCLUDE_DIRS})
    endif()
  endif()
  if(RS_MPI_INCLUDES_${f})
    list(APPEND RS_MPI_FAMILIES ${f})
  elseif(f IN_LIST rs_mpi_required)
    message(FATAL_ERROR "RANKSNAP_MPI=${RANKSNAP_MPI}: no mpi.h of ${f} found (FindMPI, or "
      "pkg-config's ${RS_MPI_PC_${f}})")
  endif()
endforeach()
message(STATUS "ranksnap: MPI plugins for: ${RS_MPI_FAMILIES}; the tests' MPI: "
  "${RS_TEST_MPI_FAMILY} ${MPIEXEC_EXECUTABLE}")

# rs_mpi_plugins(): the targets ranksnap_mpi_<family> (libranksnap-mpi-<family>.so), and
# ranksnap_mpi (ranksnap::mpi), the tests' family's, which a program links ahead of its MPI so
# that its MPI_Init is the plugin's. Built with the library (add_dependencies): a test that runs
# libranksnap.so finds its plugins beside it.
function(rs_mpi_plugins)
  foreach(f ${RS_MPI_FAMILIES})
    add_library(rs_mpi_plugin_${f}_obj OBJECT rank/mpi_plugin/plugin.c rank/mpi_plugin/pmpi.c)
    target_include_directories(rs_mpi_plugin_${f}_obj PRIVATE
      ${PROJECT_SOURCE_DIR}/rank/mpi_plugin ${PROJECT_SOURCE_DIR}/rank/mpi ${PROJECT_SOURCE_DIR}/include)
    target_include_directories(rs_mpi_plugin_${f}_obj SYSTEM PRIVATE ${RS_MPI_INCLUDES_${f}})
    target_compile_definitions(rs_mpi_plugin_${f}_obj PRIVATE ${RS_COMMON_DEFS})
    target_compile_options(rs_mpi_plugin_${f}_obj PRIVATE -fno-omit-frame-pointer)
    add_library(ranksnap_mpi_${f} SHARED $<TARGET_OBJECTS:rs_mpi_plugin_${f}_obj>)
    # no MPI library linked: its PMPI_* calls bind to the process's MPI (rank/mpi_plugin/plugin.c)
    set_target_properties(ranksnap_mpi_${f} PROPERTIES OUTPUT_NAME ranksnap-mpi-${f})
    target_link_options(ranksnap_mpi_${f} PRIVATE -Wl,--exclude-libs,ALL)
    add_dependencies(ranksnap ranksnap_mpi_${f})
  endforeach()
  if(RS_TEST_MPI_FAMILY IN_LIST RS_MPI_FAMILIES)
    add_library(ranksnap_mpi INTERFACE)
    set_target_properties(ranksnap_mpi PROPERTIES EXPORT_NAME mpi)
    target_link_libraries(ranksnap_mpi INTERFACE ranksnap_mpi_${RS_TEST_MPI_FAMILY} ranksnap)
    add_library(ranksnap::mpi ALIAS ranksnap_mpi)
  endif()
endfunction()
