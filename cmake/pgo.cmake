# pgo.cmake — the pickle decoders (rs_decode) compiled with GCC's profile of them reading real
# PyTorch pickles (RANKSNAP_PGO): `ranksnap report` of PyTorch snapshots spends most of its time
# there, in branches whose odds only a run can tell (8% less CPU for the benchmark's four
# snapshots, which are not among those trained on: docs/BENCHMARKS.md).
#
# Included after rs_layer(rs_decode ...), with RS_DECODE_SOURCES its sources:
#   1. rs_decode_train: the same sources as a layer of its own, instrumented (-fprofile-generate);
#   2. its training run: cmake/pgo_train.c decodes tests/data's real pickles (gpt2_ddp4.tar.gz,
#      oom_rank-3_gpt2.pickle, snapshot_rank*.pickle), run again whenever it is relinked;
#   3. rs_decode's objects compiled with -fprofile-use. Every source must have its counts (checked
#      after the run); a function the run did not reach has none (GCC leaves it out of the file,
#      and would warn, -Wmissing-profile) and is optimized as without a profile
#      (-fprofile-partial-training): the ring decoder, a decode's errors.
# Opt-in (RANKSNAP_PGO=OFF by default): the object code then depends on tests/data and on the
# training run, which a user's build from source should not. Only where the result would be used
# as is: GCC 11 or later (-dumpdir and -dumpbase as it reads
# them), an optimized single-configuration build, no sanitizers, not cross-compiled (the run is
# local).

set(RS_PGO OFF)
set(RS_PGO_WHY "")
if(NOT RANKSNAP_PGO)
  set(RS_PGO_WHY "RANKSNAP_PGO=OFF")
elseif(NOT CMAKE_C_COMPILER_ID STREQUAL "GNU" OR CMAKE_C_COMPILER_VERSION VERSION_LESS 11)
  set(RS_PGO_WHY "needs GCC 11 or later, not ${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}")
elseif(CMAKE_CONFIGURATION_TYPES OR NOT CMAKE_BUILD_TYPE MATCHES "^(Release|RelWithDebInfo)$")
  set(RS_PGO_WHY "only for Release and RelWithDebInfo builds")
elseif(RANKSNAP_SANITIZE OR RANKSNAP_FUZZ)
  set(RS_PGO_WHY "not with sanitizers or fuzzing")
elseif(CMAKE_CROSSCOMPILING)
  set(RS_PGO_WHY "not when cross-compiling")
elseif(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tests/data/gpt2_ddp4.tar.gz)
  set(RS_PGO_WHY "tests/data's pickles are not there to train on")
else()
  set(RS_PGO ON)
endif()
message(STATUS "ranksnap: profile-guided pickle decoders ${RS_PGO} ${RS_PGO_WHY}")

if(RS_PGO)
  set(RS_PGO_DIR ${CMAKE_CURRENT_BINARY_DIR}/pgo)
  set(RS_PGO_DATA ${CMAKE_CURRENT_SOURCE_DIR}/tests/data)
  # GCC names a source's counts, and tells its static functions apart in them, by the object's
  # auxiliary name: both builds of a source get the same one, in pgo/aux
  set(RS_PGO_NAMES)
  foreach(src ${RS_DECODE_SOURCES})
    string(REPLACE "/" "_" aux "${src}")
    list(APPEND RS_PGO_NAMES ${aux})
    set_property(SOURCE ${src} APPEND PROPERTY COMPILE_OPTIONS
                 -dumpdir ${RS_PGO_DIR}/aux/ -dumpbase ${aux})
  endforeach()
  file(MAKE_DIRECTORY ${RS_PGO_DIR}/aux)
  rs_layer(rs_decode_train DIR collector/decode SOURCES ${RS_DECODE_SOURCES} DEPS rs_decode_rsnap)
  target_compile_options(rs_decode_train_obj PRIVATE -fprofile-generate -fprofile-update=single)
  add_executable(rs_pgo_train cmake/pgo_train.c)
  target_compile_definitions(rs_pgo_train PRIVATE ${RS_COMMON_DEFS})
  target_link_libraries(rs_pgo_train PRIVATE rs_decode_train)
  target_link_options(rs_pgo_train PRIVATE -fprofile-generate)
  set(RS_PGO_LOOSE ${RS_PGO_DATA}/oom_rank-3_gpt2.pickle ${RS_PGO_DATA}/snapshot_rank0.pickle
    ${RS_PGO_DATA}/snapshot_rank1.pickle ${RS_PGO_DATA}/snapshot_rank2.pickle)
  set(RS_PGO_PICKLES
    ${RS_PGO_DIR}/data/gpt2_ddp4/rank-00000.pickle ${RS_PGO_DIR}/data/gpt2_ddp4/rank-00001.pickle
    ${RS_PGO_DIR}/data/gpt2_ddp4/rank-00002.pickle ${RS_PGO_DIR}/data/gpt2_ddp4/rank-00003.pickle
    ${RS_PGO_LOOSE})
  list(JOIN RS_PGO_NAMES "," RS_PGO_NAME_LIST)
  set(RS_PGO_COUNTS ${CMAKE_COMMAND} -DDIR=${RS_PGO_DIR}/aux -DNAMES=${RS_PGO_NAME_LIST})
  add_custom_command(OUTPUT ${RS_PGO_DIR}/profile.stamp
    COMMAND ${RS_PGO_COUNTS} -DMODE=clear -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/pgo_counts.cmake
    COMMAND ${CMAKE_COMMAND} -E make_directory ${RS_PGO_DIR}/data
    COMMAND ${CMAKE_COMMAND} -E chdir ${RS_PGO_DIR}/data
            ${CMAKE_COMMAND} -E tar xzf ${RS_PGO_DATA}/gpt2_ddp4.tar.gz
    COMMAND rs_pgo_train ${RS_PGO_PICKLES}
    COMMAND ${RS_PGO_COUNTS} -DMODE=check -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/pgo_counts.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${RS_PGO_DIR}/profile.stamp
    DEPENDS rs_pgo_train ${RS_PGO_DATA}/gpt2_ddp4.tar.gz ${RS_PGO_LOOSE}
            ${CMAKE_CURRENT_SOURCE_DIR}/cmake/pgo_counts.cmake
    COMMENT "Training the pickle decoders' profile on tests/data's PyTorch pickles" VERBATIM)
  add_custom_target(rs_pgo_profile DEPENDS ${RS_PGO_DIR}/profile.stamp)
  add_dependencies(rs_decode_obj rs_pgo_profile)
  target_compile_options(rs_decode_obj PRIVATE -fprofile-use -fprofile-partial-training
                         -Wno-missing-profile)
endif()
